import { useState, type ReactNode } from "react";
import type { ConnectionStatus } from "@convo/client";
import { roleLabel } from "../state/people";
import { ConnectionIndicator } from "./ConnectionIndicator";
import { PresenceAvatars } from "./Presence";

/**
 * ConversationHeader: the conversation's title, the caller's role when it
 * is shared with them, who else is here, its connection, "Members",
 * "Share" (share links: for the owner and participants, never a viewer),
 * and, for its owner, "Clear history" (confirmed in place).
 */
export function ConversationHeader({
  title,
  status,
  empty,
  onClear,
  children,
  role = "owner",
  present = [],
  onMembers,
  onShare,
}: {
  /** The caller's role ("owner" when the server gave none). */
  role?: string;
  /** The others viewing the conversation now (user ids). */
  present?: readonly string[];
  /** Opens the members panel. */
  onMembers?: () => void;
  /** Opens the share links dialog (shown to the owner and participants). */
  onShare?: () => void;
  title: string;
  status: ConnectionStatus;
  /** No messages: nothing to clear. */
  empty: boolean;
  onClear: () => void;
  /** Rendered at the start (the menu button on narrow screens). */
  children?: ReactNode;
}) {
  const [confirmClear, setConfirmClear] = useState(false);
  return (
    <header className="main-head">
      {children}
      <h1 className="title" title={title}>
        {title}
      </h1>
      {role !== "owner" ? (
        <span className="badge role-badge" title={role === "viewer" ? "Shared with you: you read it" : "Shared with you: you read and write it"}>
          {roleLabel(role)}
        </span>
      ) : null}
      <PresenceAvatars ids={present} />
      <ConnectionIndicator status={status} />
      {onMembers ? (
        <button type="button" className="ghost small" onClick={onMembers}>
          Members
        </button>
      ) : null}
      {onShare && role !== "viewer" ? (
        <button type="button" className="ghost small" onClick={onShare}>
          Share
        </button>
      ) : null}
      {role !== "owner" ? null : confirmClear ? (
        <span className="confirm" role="group" aria-label="Confirm clearing the history">
          <span className="small">Clear all messages?</span>
          <button
            type="button"
            className="danger small"
            onClick={() => {
              setConfirmClear(false);
              onClear();
            }}
          >
            Clear
          </button>
          <button type="button" className="ghost small" onClick={() => setConfirmClear(false)}>
            Cancel
          </button>
        </span>
      ) : (
        <button type="button" className="ghost small" onClick={() => setConfirmClear(true)} disabled={empty}>
          Clear history
        </button>
      )}
    </header>
  );
}
