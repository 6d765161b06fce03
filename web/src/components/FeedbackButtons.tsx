import { Rating } from "../gen/convo/v1/types_pb";
import type { MessageState } from "../state/types";

export function FeedbackButtons({
  message,
  onFeedback,
}: {
  message: MessageState;
  onFeedback: (messageId: string, up: boolean) => void;
}) {
  const r = message.feedback?.rating;
  return (
    <span className="feedback" role="group" aria-label="Rate this reply">
      <button
        type="button"
        className="icon-button"
        aria-pressed={r === Rating.UP}
        aria-label="Good reply"
        title="Good reply"
        onClick={() => onFeedback(message.id, true)}
      >
        <svg viewBox="0 0 24 24" aria-hidden="true" width="16" height="16">
          <path d="M2 21h4V9H2v12zm20-11a2 2 0 0 0-2-2h-6.3l1-4.6V3a1.5 1.5 0 0 0-.5-1.1L13.1 1 6.6 7.6A2 2 0 0 0 6 9v10a2 2 0 0 0 2 2h9c.8 0 1.5-.5 1.8-1.2l3-7.1c.1-.2.2-.5.2-.7v-2z" />
        </svg>
      </button>
      <button
        type="button"
        className="icon-button"
        aria-pressed={r === Rating.DOWN}
        aria-label="Bad reply"
        title="Bad reply"
        onClick={() => onFeedback(message.id, false)}
      >
        <svg viewBox="0 0 24 24" aria-hidden="true" width="16" height="16">
          <path d="M22 3h-4v12h4V3zM2 14a2 2 0 0 0 2 2h6.3l-1 4.6V21c0 .4.2.8.5 1.1l1.1 1 6.5-6.6c.4-.4.6-.9.6-1.5V5a2 2 0 0 0-2-2H7c-.8 0-1.5.5-1.8 1.2l-3 7.1c-.1.2-.2.5-.2.7v2z" />
        </svg>
      </button>
    </span>
  );
}
