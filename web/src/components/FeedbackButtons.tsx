import { useEffect, useRef, useState, type FormEvent, type KeyboardEvent, type ReactNode } from "react";
import { Rating } from "@convo/client";
import type { MessageState } from "@convo/client";

/** The API's limit on a feedback comment (SubmitFeedbackRequest.comment). */
export const maxCommentLength = 2000;

/**
 * FeedbackButtons rates a reply (thumbs up or down) and, once rated, lets
 * the reader add, change or remove an optional comment. It renders inside
 * the message's action row: the thumbs, the comment button, `children`
 * (the other actions), then the comment or its editor on a line of its own.
 * Keyboard: Enter in the comment saves it, Shift+Enter adds a line, Escape
 * leaves it unchanged; focus returns to the comment button either way.
 */
export function FeedbackButtons({
  message,
  onFeedback,
  children,
}: {
  message: MessageState;
  onFeedback: (messageId: string, rating: Rating, comment: string) => void;
  children?: ReactNode;
}) {
  const rating = message.feedback?.rating;
  const comment = message.feedback?.comment ?? "";
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState("");
  const toggleRef = useRef<HTMLButtonElement>(null);
  const formRef = useRef<HTMLFormElement>(null);
  const wasEditing = useRef(false);

  useEffect(() => {
    // The whole editor in view, its buttons too, not only the focused field.
    if (editing) formRef.current?.scrollIntoView({ block: "nearest" });
    else if (wasEditing.current) toggleRef.current?.focus();
    wasEditing.current = editing;
  }, [editing]);

  // A new rating keeps the comment: SubmitFeedback replaces both.
  const rate = (r: Rating) => onFeedback(message.id, r, comment);

  const open = () => {
    setDraft(comment);
    setEditing(true);
  };

  const save = (e?: FormEvent) => {
    e?.preventDefault();
    const next = draft.trim();
    if (rating !== undefined && next !== comment) onFeedback(message.id, rating, next);
    setEditing(false);
  };

  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      save(e);
    } else if (e.key === "Escape") {
      // Only the editor closes, not a dialog or drawer around it.
      e.stopPropagation();
      setEditing(false);
    }
  };

  const inputId = `feedback-comment-${message.id}`;
  const hintId = `${inputId}-hint`;
  return (
    <>
      <span className="feedback" role="group" aria-label="Rate this reply">
        <button
          type="button"
          className="icon-button"
          aria-pressed={rating === Rating.UP}
          aria-label="Good reply"
          title="Good reply"
          onClick={() => rate(Rating.UP)}
        >
          <svg viewBox="0 0 24 24" aria-hidden="true" width="16" height="16">
            <path d="M2 21h4V9H2v12zm20-11a2 2 0 0 0-2-2h-6.3l1-4.6V3a1.5 1.5 0 0 0-.5-1.1L13.1 1 6.6 7.6A2 2 0 0 0 6 9v10a2 2 0 0 0 2 2h9c.8 0 1.5-.5 1.8-1.2l3-7.1c.1-.2.2-.5.2-.7v-2z" />
          </svg>
        </button>
        <button
          type="button"
          className="icon-button"
          aria-pressed={rating === Rating.DOWN}
          aria-label="Bad reply"
          title="Bad reply"
          onClick={() => rate(Rating.DOWN)}
        >
          <svg viewBox="0 0 24 24" aria-hidden="true" width="16" height="16">
            <path d="M22 3h-4v12h4V3zM2 14a2 2 0 0 0 2 2h6.3l-1 4.6V21c0 .4.2.8.5 1.1l1.1 1 6.5-6.6c.4-.4.6-.9.6-1.5V5a2 2 0 0 0-2-2H7c-.8 0-1.5.5-1.8 1.2l-3 7.1c-.1.2-.2.5-.2.7v2z" />
          </svg>
        </button>
      </span>
      {rating !== undefined ? (
        <button
          type="button"
          ref={toggleRef}
          className="ghost small"
          aria-expanded={editing}
          aria-controls={editing ? inputId : undefined}
          onClick={() => (editing ? setEditing(false) : open())}
        >
          {comment ? "Edit comment" : "Add a comment"}
        </button>
      ) : null}
      {children}
      {editing ? (
        <form ref={formRef} className="feedback-form" onSubmit={save} aria-label="Feedback comment">
          <label className="visually-hidden" htmlFor={inputId}>
            Comment on this reply (optional)
          </label>
          <textarea
            id={inputId}
            rows={2}
            value={draft}
            maxLength={maxCommentLength}
            placeholder="What was good or bad about this reply? (optional)"
            aria-describedby={hintId}
            onChange={(e) => setDraft(e.target.value)}
            onKeyDown={onKeyDown}
            onFocus={(e) => e.currentTarget.setSelectionRange(e.currentTarget.value.length, e.currentTarget.value.length)}
            autoFocus
          />
          <div className="feedback-form-row">
            <span id={hintId} className="muted small">
              Enter to save · Shift+Enter for a new line · Esc to cancel · {draft.length}/{maxCommentLength}
            </span>
            <button type="button" className="ghost small" onClick={() => setEditing(false)}>
              Cancel
            </button>
            <button type="submit" className="primary small">
              Save comment
            </button>
          </div>
        </form>
      ) : comment ? (
        <p className="feedback-comment">
          <span className="muted small">Your comment:</span> {comment}
        </p>
      ) : null}
    </>
  );
}
