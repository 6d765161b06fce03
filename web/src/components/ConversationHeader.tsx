import { useState, type ReactNode } from "react";
import type { ConnectionStatus } from "@convo/client";
import { ConnectionIndicator } from "./ConnectionIndicator";

/** ConversationHeader: the conversation's title, its connection, and "Clear history" (confirmed in place). */
export function ConversationHeader({
  title,
  status,
  empty,
  onClear,
  children,
}: {
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
      <ConnectionIndicator status={status} />
      {confirmClear ? (
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
