import type { ConnectionStatus } from "../api/stream";

const labels: Record<ConnectionStatus, string> = {
  connecting: "Connecting",
  live: "Live",
  reconnecting: "Reconnecting",
  offline: "Offline",
};

/** ConnectionIndicator says whether the conversation's stream is live, reconnecting, or offline. */
export function ConnectionIndicator({ status }: { status: ConnectionStatus }) {
  return (
    <span className={`conn conn-${status}`} role="status" aria-label={`Connection: ${labels[status]}`} data-status={status}>
      <span className="conn-dot" aria-hidden="true" />
      <span className="conn-label">{labels[status]}</span>
    </span>
  );
}
