// Share links in the web app: what a share's page shows (the state a
// GetSharedConversation or StreamSharedConversation answer holds, folded
// as a snapshot), how a share is described in the Share dialog, and the
// expiries it offers.

import { Code, ConnectError, initialState, reduce, tsMs, type ConversationState } from "@convo/client";
import type { GetSharedConversationResponse, Share } from "@convo/client";

/**
 * sharedView is what a share shows, as the conversation state the app's
 * message components render. Each answer is the whole state: a later one
 * replaces it, never folds into it.
 */
export function sharedView(res: Pick<GetSharedConversationResponse, "conversation" | "messages" | "seq">): ConversationState {
  return reduce(initialState(res.conversation?.id ?? ""), {
    type: "snapshot",
    snapshot: { conversation: res.conversation, messages: res.messages, seq: res.seq },
  });
}

/**
 * isShareGone reports whether an error of GetSharedConversation,
 * StreamSharedConversation or ForkShare means the link opens nothing: a
 * token revoked, expired or unknown (NotFound, the same for all three),
 * or no token at all (InvalidArgument). Anything else may pass.
 */
export function isShareGone(err: unknown): boolean {
  const code = ConnectError.from(err).code;
  return code === Code.NotFound || code === Code.InvalidArgument;
}

/** ShareStatus: a share opens ("active"), or no more. */
export type ShareStatus = "active" | "revoked" | "expired";

/** shareStatus is whether the share still opens at now (ms since the epoch). */
export function shareStatus(s: Pick<Share, "revokedAt" | "expiresAt">, now = Date.now()): ShareStatus {
  if (s.revokedAt) return "revoked";
  const exp = tsMs(s.expiresAt);
  return exp !== undefined && exp <= now ? "expired" : "active";
}

/** shareModeLabel names a share's mode and whether its readers see tool calls. */
export function shareModeLabel(s: Pick<Share, "mode" | "includeTools">): string {
  const mode = s.mode === "live" ? "Live" : s.mode === "snapshot" ? "Snapshot" : s.mode;
  return s.includeTools ? `${mode}, with tool calls` : mode;
}

/** mayRevoke: the server lets the share's creator and the conversation's owner revoke it. */
export function mayRevoke(s: Pick<Share, "createdBy">, me: string | null, role: string): boolean {
  return role === "owner" || (me !== null && s.createdBy === me);
}

/** An expiry the Share dialog offers: "" never, else a lifetime. */
export interface ExpiryChoice {
  value: string;
  label: string;
  /** ms; absent: until revoked. */
  lifetime?: number;
}

const hour = 3_600_000;
const day = 24 * hour;

/** expiryChoices are the Share dialog's expiries (the server takes at most 366 days). */
export const expiryChoices: readonly ExpiryChoice[] = [
  { value: "", label: "Never (until revoked)" },
  { value: "1h", label: "In 1 hour", lifetime: hour },
  { value: "1d", label: "In 1 day", lifetime: day },
  { value: "7d", label: "In 7 days", lifetime: 7 * day },
  { value: "30d", label: "In 30 days", lifetime: 30 * day },
];

/** expiresAt is when a share made at now with the expiry choice value stops opening; undefined: never (or an unknown choice). */
export function expiresAt(value: string, now = Date.now()): Date | undefined {
  const c = expiryChoices.find((x) => x.value === value);
  return c?.lifetime === undefined ? undefined : new Date(now + c.lifetime);
}
