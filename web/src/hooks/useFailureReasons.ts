import { useEffect, useMemo, useState } from "react";
import type { ConvoClient } from "../api/client";
import type { ConversationState } from "@convo/client";

/**
 * missingReasons lists the failed replies the state holds whose reason it
 * does not know, newest first, leaving out those in known (already looked
 * up) and those in asked (being looked up, or looked up with no answer).
 *
 * A reply's reason reaches the state only through its live promptFailed
 * event (state.errors): a snapshot (GetConversation, the stream's first
 * response, a reload, a tab opened later) carries the message's status,
 * not why it failed. A reply that failed before the stream's snapshot was
 * read (a worker that cannot reach its model fails at once) never shows
 * its reason live.
 */
export function missingReasons(
  state: ConversationState,
  known: Readonly<Record<string, string>>,
  asked: ReadonlySet<string>,
): string[] {
  const out: string[] = [];
  for (let i = state.messageIds.length - 1; i >= 0; i--) {
    const id = state.messageIds[i];
    const m = state.messages[id];
    if (m?.role !== "assistant" || m.status !== "failed") continue;
    if (state.errors[id] !== undefined || known[id] !== undefined || asked.has(id)) continue;
    out.push(id);
  }
  return out;
}

/**
 * useFailureReasons is why each failed reply failed, by message id: the
 * reasons the stream brought (state.errors), and for the failed replies it
 * brought none for, the failed prompt's error read with GetTrace (the
 * prompt of the message), one reply at a time, newest first, each once. A
 * lookup that fails leaves the reply without a reason ("The reply
 * failed."; Trace retries).
 */
export function useFailureReasons(client: ConvoClient, state: ConversationState): Readonly<Record<string, string>> {
  const [fetched, setFetched] = useState<Record<string, string>>({});
  const [asked, setAsked] = useState<ReadonlySet<string>>(() => new Set());
  const [busy, setBusy] = useState(false);
  const next = busy ? undefined : missingReasons(state, fetched, asked)[0];
  useEffect(() => {
    if (next === undefined) return;
    setBusy(true);
    setAsked((a) => new Set(a).add(next));
    client
      .getTrace({ target: { case: "messageId", value: next } })
      .then((res) => {
        const error = res.trace?.prompt?.error;
        if (error) setFetched((f) => ({ ...f, [next]: error }));
      })
      .catch(() => {
        /* the reply still says it failed; Trace shows why, or why not */
      })
      .finally(() => setBusy(false));
  }, [client, next]);
  return useMemo(() => ({ ...fetched, ...state.errors }), [fetched, state.errors]);
}
