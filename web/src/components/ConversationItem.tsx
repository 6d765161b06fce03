import { useEffect, useRef, useState, type KeyboardEvent } from "react";
import { errorMessage, type ConvoClient } from "../api/client";
import type { ConversationInfo } from "@convo/client";
import type { ConversationList } from "@convo/react";
import { conversationPath, navigate } from "../router";
import { relativeTime } from "../util/format";
import type { Go } from "./Sidebar";

/** ConversationItem: one conversation of the sidebar, with rename and delete in place. */
export function ConversationItem({
  client,
  c,
  current,
  list,
  go,
}: {
  client: ConvoClient;
  c: ConversationInfo;
  current: boolean;
  list: ConversationList;
  go: Go;
}) {
  const [mode, setMode] = useState<"view" | "rename" | "delete">("view");
  const [title, setTitle] = useState(c.title);
  const [error, setError] = useState<string | null>(null);
  const inputRef = useRef<HTMLInputElement>(null);
  const label = c.title || "Untitled";
  // Renaming and deleting are the owner's (a member leaves, from the conversation's Members).
  const owned = !c.role || c.role === "owner";

  useEffect(() => {
    if (mode === "rename") inputRef.current?.select();
  }, [mode]);

  // Enter, Escape and blur can all end an edit: only the first one counts.
  const editing = useRef(false);
  const rename = async () => {
    if (!editing.current) return;
    editing.current = false;
    const t = title.trim();
    setMode("view");
    if (!t || t === c.title) return;
    list.patch(c.id, { title: t });
    try {
      await client.renameConversation({ conversationId: c.id, title: t });
      setError(null);
    } catch (err) {
      setError(errorMessage(err));
    }
    list.refresh();
  };

  const remove = async () => {
    setMode("view");
    try {
      await client.deleteConversation({ conversationId: c.id });
      list.patch(c.id, null);
      if (current) navigate("/", { replace: true });
    } catch (err) {
      setError(errorMessage(err));
    }
    list.refresh();
  };

  const onRenameKey = (e: KeyboardEvent<HTMLInputElement>) => {
    if (e.key === "Enter") {
      e.preventDefault();
      void rename();
    } else if (e.key === "Escape") {
      editing.current = false;
      setTitle(c.title);
      setMode("view");
    }
  };

  return (
    <li className={`conv-item${current ? " is-current" : ""}`} data-conversation-id={c.id}>
      {mode === "rename" ? (
        <div className="conv-rename">
          <label className="visually-hidden" htmlFor={`rename-${c.id}`}>
            New title
          </label>
          <input
            id={`rename-${c.id}`}
            ref={inputRef}
            value={title}
            maxLength={200}
            onChange={(e) => setTitle(e.target.value)}
            onKeyDown={onRenameKey}
            onBlur={() => void rename()}
          />
        </div>
      ) : (
        <a
          href={conversationPath(c.id)}
          className="conv-link"
          aria-current={current ? "page" : undefined}
          onClick={go(conversationPath(c.id))}
        >
          <span className="conv-title">{label}</span>
          {c.role && c.role !== "owner" ? (
            <span className="badge shared-badge" title={`Shared with you as a ${c.role}`}>
              Shared
            </span>
          ) : null}
          <span className="conv-time muted small">{relativeTime(c.lastMessageAt ?? c.createdAt)}</span>
        </a>
      )}
      {mode === "delete" ? (
        <span className="conv-confirm" role="group" aria-label={`Delete ${label}?`}>
          <button type="button" className="danger small" onClick={() => void remove()}>
            Delete
          </button>
          <button type="button" className="ghost small" onClick={() => setMode("view")}>
            Cancel
          </button>
        </span>
      ) : mode === "view" && owned ? (
        <span className="conv-actions">
          <button
            type="button"
            className="icon-button"
            aria-label={`Rename ${label}`}
            title="Rename"
            onClick={() => {
              setTitle(c.title);
              editing.current = true;
              setMode("rename");
            }}
          >
            <svg viewBox="0 0 24 24" width="16" height="16" aria-hidden="true">
              <path d="M3 17.25V21h3.75L17.8 9.94l-3.75-3.75L3 17.25zm17.7-10.2a1 1 0 0 0 0-1.42l-2.33-2.33a1 1 0 0 0-1.42 0l-1.83 1.83 3.75 3.75 1.83-1.83z" />
            </svg>
          </button>
          <button
            type="button"
            className="icon-button"
            aria-label={`Delete ${label}`}
            title="Delete"
            onClick={() => setMode("delete")}
          >
            <svg viewBox="0 0 24 24" width="16" height="16" aria-hidden="true">
              <path d="M6 19a2 2 0 0 0 2 2h8a2 2 0 0 0 2-2V7H6v12zM19 4h-3.5l-1-1h-5l-1 1H5v2h14V4z" />
            </svg>
          </button>
        </span>
      ) : null}
      {error ? (
        <p className="message-error small" role="alert">
          {error}
        </p>
      ) : null}
    </li>
  );
}
