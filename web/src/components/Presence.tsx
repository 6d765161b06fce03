import { initials, typingLine } from "../state/people";

/** PresenceAvatars: the initials of the others viewing the conversation (the caller left out by the caller). */
export function PresenceAvatars({ ids }: { ids: readonly string[] }) {
  if (ids.length === 0) return null;
  const shown = ids.slice(0, 5);
  return (
    <ul className="presence" aria-label={`Also here: ${ids.join(", ")}`}>
      {shown.map((id) => (
        <li key={id} className="avatar" title={`${id} is here`} data-user-id={id}>
          <span aria-hidden="true">{initials(id)}</span>
          <span className="visually-hidden">{id}</span>
        </li>
      ))}
      {ids.length > shown.length ? (
        <li className="avatar avatar-more" title={ids.slice(shown.length).join(", ")}>
          +{ids.length - shown.length}
        </li>
      ) : null}
    </ul>
  );
}

/** TypingIndicator: "alice is typing…" under the messages, announced politely; empty when nobody else types. */
export function TypingIndicator({ ids }: { ids: readonly string[] }) {
  const line = typingLine(ids);
  return (
    <p className="typing-indicator muted small" role="status" aria-live="polite">
      {line}
    </p>
  );
}
