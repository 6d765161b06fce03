import type { MessageState } from "@convo/client";

/**
 * writingHint says why the branch controls do nothing while a reply is
 * being written: the server refuses edits, regenerations and switches
 * then (docs/branches.md), so the app says so before the user tries.
 */
export const writingHint = "A reply is being written: stop it or wait for it to end first.";

/**
 * VersionSwitcher is "‹ n / m ›" on a message whose turn has versions (an
 * edited message, a regenerated reply): the arrows show the previous or
 * next version (SwitchBranch by sibling index), in this tab and, through
 * the stream, in every other. It is a pill in full contrast, and the
 * footer that holds it sticks to the bottom of the list while the message
 * is on screen (.has-versions), so it never scrolls out of reach. While a
 * reply is being written they are
 * aria-disabled rather than disabled, so that they keep their place in the
 * tab order and their tooltip, which says why.
 */
export function VersionSwitcher({
  message,
  writing,
  onSwitch,
}: {
  message: MessageState;
  writing: boolean;
  onSwitch: (messageId: string, siblingIndex: number) => void;
}) {
  const { siblingIndex: index, siblingCount: count } = message;
  if (count <= 1) return null;
  const step = (to: number) => {
    if (!writing && to >= 0 && to < count) onSwitch(message.id, to);
  };
  const arrow = (to: number, label: string, glyph: string) => {
    const off = writing || to < 0 || to >= count;
    return (
      <button
        type="button"
        className="icon-button version-step"
        aria-label={label}
        aria-disabled={off}
        title={writing ? writingHint : label}
        onClick={() => step(to)}
      >
        <span aria-hidden="true">{glyph}</span>
      </button>
    );
  };
  return (
    <span className="versions" role="group" aria-label="Versions">
      {arrow(index - 1, "Previous version", "‹")}
      <span className="version-place" aria-label={`Version ${index + 1} of ${count}`}>
        {index + 1} / {count}
      </span>
      {arrow(index + 1, "Next version", "›")}
    </span>
  );
}
