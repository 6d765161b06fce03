import type { ConnectionStatus } from "@convo/client";

const labels: Record<ConnectionStatus, string> = {
  connecting: "Connecting",
  live: "Live",
  reconnecting: "Reconnecting",
  offline: "Offline",
  unauthenticated: "Signed out",
  notFound: "Not found",
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
