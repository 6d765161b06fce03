import { memo, useState, type ReactNode } from "react";
import type { Rating } from "@convo/client";
import type { BlockState, FileState, MessageState } from "@convo/client";
import { MessageFiles } from "./Attachments";
import { absoluteTime } from "../util/format";
import { BlockView } from "./blocks/BlockView";
import { FeedbackButtons } from "./FeedbackButtons";
import { MessageEditor } from "./MessageEditor";
import { Spinner } from "./Spinner";
import { VersionSwitcher, writingHint } from "./VersionSwitcher";

export interface MessageActions {
  /** onFeedback rates a reply; comment is optional ("" for none). */
  onFeedback: (messageId: string, rating: Rating, comment: string) => void;
  onTrace: (message: MessageState) => void;
  /** onEdit makes a new version of a user message holding fileIds; it resolves to whether it did. */
  onEdit: (messageId: string, text: string, fileIds: string[]) => Promise<boolean>;
  /** onRegenerate writes a reply again, as a new version. */
  onRegenerate: (messageId: string) => void;
  /** onSwitch shows version siblingIndex of the message's turn. */
  onSwitch: (messageId: string, siblingIndex: number) => void;
  /** onTakeBack takes back a queued message, with its pending reply (DeleteQueuedMessage). */
  onTakeBack?: (messageId: string) => void;
}

const isLive = (m: MessageState) => m.status === "pending" || m.status === "processing";

/** isEmptyReply: a reply that ended with nothing in it (stopped or failed before its first token). */
export const isEmptyReply = (m: MessageState, blocks: BlockState[]) =>
  !isLive(m) && m.status !== "completed" && blocks.every((b) => b.content === "" && !b.toolCall);

export const MessageView = memo(function MessageView({
  message,
  blocks,
  error,
  actions,
  highlighted,
  hideRole,
  pauses,
  writing = false,
  sender,
  takeBack = false,
}: {
  /** Who sent a user message ("You" for the caller; senderName); unset: "You". */
  sender?: string;
  /** The caller may take this queued message back (mayTakeBack): a "Take back" button. */
  takeBack?: boolean;
  /** A reply of the conversation is being written: edits, regenerations and switches wait. */
  writing?: boolean;
  /** The reply's open input requests (PauseCard), shown after its blocks. */
  pauses?: ReactNode;
  message: MessageState;
  blocks: BlockState[];
  error?: string;
  /**
   * What the message's buttons do. None: the message is read only (a
   * share link's page): no feedback, trace, edit, regenerate, versions or
   * take back.
   */
  actions?: MessageActions;
  highlighted?: boolean;
  hideRole?: boolean;
}) {
  const live = isLive(message);
  const who = message.role === "user" && sender ? sender : roleName(message.role);
  const queued = Boolean(message.queued);
  const assistant = message.role === "assistant";
  const [editing, setEditing] = useState(false);
  // A message's files show together, after its other blocks.
  const files = blocks.flatMap((b): FileState[] => (b.blockType === "file" && b.file ? [b.file] : []));
  const shown = files.length > 0 ? blocks.filter((b) => b.blockType !== "file") : blocks;
  const versions = actions ? <VersionSwitcher message={message} writing={writing} onSwitch={actions.onSwitch} /> : null;
  // A comparison's replies are one version: not regenerated on their own.
  const regenerate =
    actions && assistant && !message.comparisonId ? (
      <button
        type="button"
        className="ghost small"
        aria-disabled={writing}
        title={writing ? writingHint : "Write this reply again, keeping this version"}
        onClick={() => !writing && actions.onRegenerate(message.id)}
      >
        Regenerate
      </button>
    ) : null;
  return (
    <article
      id={`m-${message.id}`}
      className={`message message-${message.role} status-${message.status}${message.siblingCount > 1 ? " has-versions" : ""}${highlighted ? " is-highlighted" : ""}${queued ? " is-queued" : ""}`}
      data-message-id={message.id}
      data-status={message.status}
      data-queued={queued || undefined}
      aria-label={who === roleName(message.role) ? `${who} message` : `Message from ${who}`}
      aria-busy={live}
    >
      {hideRole ? null : (
        <header className="message-head">
          <span className="role">{who}</span>
          {queued ? (
            <span className="badge queued-badge" title="Sent while a reply runs: its reply starts when the replies before it end">
              Queued
            </span>
          ) : null}
          <time className="muted small" dateTime={message.createdAt ? new Date(message.createdAt).toISOString() : undefined}>
            {absoluteTime(message.createdAt)}
          </time>
        </header>
      )}
      <div className="message-body">
        {editing && actions ? (
          <MessageEditor
            messageId={message.id}
            text={shown.map((b) => b.content).join("")}
            files={files}
            writing={writing}
            onSave={(text, fileIds) => actions.onEdit(message.id, text, fileIds)}
            onCancel={() => setEditing(false)}
          />
        ) : (
          <>
            {shown.map((b) => (
              <BlockView
                key={b.id}
                block={b}
                messageLive={live}
                messageStopped={message.status === "failed" || message.status === "cancelled"}
              />
            ))}
            <MessageFiles files={files} />
          </>
        )}
        {pauses}
        {live && !pauses && !blocks.some((b) => b.status === "streaming") ? (
          <p className="muted waiting">
            <Spinner />{" "}
            {message.status === "pending"
              ? queued
                ? "Queued: starts when the reply before it ends"
                : "Waiting for a worker…"
              : "Working…"}
          </p>
        ) : null}
        {message.status === "failed" ? (
          <p className="message-error" role="alert">
            The reply failed{error ? `: ${error}` : "."}
          </p>
        ) : null}
        {message.status === "cancelled" ? <p className="muted small stopped">Stopped.</p> : null}
      </div>
      {!actions ? null : assistant && !live && !(message.status === "cancelled" && isEmptyReply(message, blocks)) ? (
        <footer className="message-actions">
          {versions}
          <FeedbackButtons message={message} onFeedback={actions.onFeedback}>
            {regenerate}
            <button type="button" className="ghost small" onClick={() => actions.onTrace(message)}>
              Trace
            </button>
          </FeedbackButtons>
        </footer>
      ) : assistant ? (
        <footer className="message-actions">
          {versions}
          {live ? null : regenerate}
        </footer>
      ) : null}
      {!actions ? null : message.role === "user" && queued ? (
        <footer className="message-actions">
          {takeBack && actions.onTakeBack ? (
            <button
              type="button"
              className="ghost small"
              title="Take this message back before its reply starts"
              onClick={() => actions.onTakeBack?.(message.id)}
            >
              Take back
            </button>
          ) : null}
        </footer>
      ) : message.role === "user" && !editing ? (
        <footer className="message-actions">
          {versions}
          <button
            type="button"
            className="ghost small"
            aria-disabled={writing}
            title={writing ? writingHint : "Edit this message: a new version, with its own reply"}
            onClick={() => !writing && setEditing(true)}
          >
            Edit
          </button>
        </footer>
      ) : null}
    </article>
  );
});

function roleName(role: string): string {
  return role === "user" ? "You" : role === "assistant" ? "Assistant" : role === "system" ? "System" : role;
}
