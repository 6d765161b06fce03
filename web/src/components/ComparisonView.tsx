import { Preference } from "@convo/client";
import type { BlockState, MessageState } from "@convo/client";
import { isEmptyReply, MessageView, type MessageActions } from "./MessageView";

export interface ComparisonSide {
  message: MessageState;
  blocks: BlockState[];
  error?: string;
  /** model names the model the side was asked of (see modelLabel), once known. */
  model?: string;
}

const votes: { p: Preference; label: string }[] = [
  { p: Preference.A, label: "A is better" },
  { p: Preference.TIE, label: "Tie" },
  { p: Preference.B, label: "B is better" },
];

/** ComparisonView shows the two replies of an A/B comparison side by side, and the vote (unless read only). */
export function ComparisonView({
  comparisonId,
  sides,
  vote,
  onVote,
  actions,
  highlightedId,
  writing = false,
}: {
  /** A reply of the conversation is being written (see MessageView). */
  writing?: boolean;
  comparisonId: string;
  sides: ComparisonSide[];
  vote: Preference | undefined;
  /** Votes; none: read only (a share link's page), no vote asked. */
  onVote?: (comparisonId: string, p: Preference) => void;
  /** The replies' buttons; none: read only (MessageView). */
  actions?: MessageActions;
  highlightedId?: string;
}) {
  const done = sides.every((s) => s.message.status !== "pending" && s.message.status !== "processing");
  // An empty side (stopped or failed before its first token) leaves nothing to compare.
  const empty = done && sides.some((s) => isEmptyReply(s.message, s.blocks));
  return (
    <section className="comparison" aria-label="A/B comparison" data-comparison-id={comparisonId}>
      <div className="comparison-sides">
        {sides.map((s) => (
          <div className="comparison-side" key={s.message.id}>
            <h3 className="comparison-slot">
              Reply {s.message.comparisonSlot.toUpperCase() || "?"}
              {s.model ? <span className="comparison-model"> · {s.model}</span> : null}
            </h3>
            <MessageView
              message={s.message}
              blocks={s.blocks}
              error={s.error}
              actions={actions}
              hideRole
              highlighted={highlightedId === s.message.id}
              writing={writing}
            />
          </div>
        ))}
      </div>
      {onVote ? (
        <div className="comparison-vote" role="group" aria-label="Which reply is better?">
          <span className="muted small">
            {!done ? "Vote when both replies are done." : empty ? "A reply is empty: nothing to compare." : "Which reply is better?"}
          </span>
          {votes.map((v) => (
            <button
              key={v.p}
              type="button"
              className="small"
              aria-pressed={vote === v.p}
              disabled={!done || empty}
              onClick={() => onVote(comparisonId, v.p)}
            >
              {v.label}
            </button>
          ))}
        </div>
      ) : null}
    </section>
  );
}
