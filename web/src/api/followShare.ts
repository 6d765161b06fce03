// Following what a share link shows, with its token alone: the state now
// (GetSharedConversation), then, for a live share, every later state from
// StreamSharedConversation, each whole (it replaces the last). A dropped
// stream is opened again after a backoff; a link that opens nothing any
// more (revoked, expired, unknown) ends it for good.

import { backoffDelay, type ConnectionStatus, type ConvoClient, type GetSharedConversationResponse } from "@convo/client";
import { isShareGone } from "../state/shares";

/** The two RPCs a share's page calls, as the app's client has them. */
export type ShareReader = Pick<ConvoClient, "getSharedConversation" | "streamSharedConversation">;

export interface FollowShareOptions {
  client: ShareReader;
  token: string;
  /** Each whole state the share shows, in order: the last replaces the ones before. */
  onState: (s: GetSharedConversationResponse) => void;
  /** The link opens nothing any more: called once, and nothing follows. */
  onGone: () => void;
  /** The connection's state: connecting, live, then reconnecting or offline after a drop. */
  onStatus?: (s: ConnectionStatus) => void;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
}

/** After this many failed attempts in a row the status says offline (retries go on). */
const OFFLINE_AFTER = 3;

/**
 * followShare reads the share and, when it is live, follows it until the
 * returned stop function is called or the link stops opening (onGone). A
 * snapshot share never changes: one read is all. A read or stream that
 * fails otherwise is tried again with backoff; the stream's first state
 * brings whatever was missed meanwhile.
 */
export function followShare(o: FollowShareOptions): () => void {
  const initial = o.initialBackoffMs ?? 500;
  const max = o.maxBackoffMs ?? 10_000;
  const stopped = new AbortController();
  let status: ConnectionStatus | null = null;
  const setStatus = (s: ConnectionStatus) => {
    if (s !== status) {
      status = s;
      o.onStatus?.(s);
    }
  };
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        stopped.signal.removeEventListener("abort", done);
        resolve();
      }
      stopped.signal.addEventListener("abort", done);
    });

  async function run() {
    let failures = 0;
    let read = false;
    setStatus("connecting");
    while (!stopped.signal.aborted) {
      try {
        if (!read) {
          const res = await o.client.getSharedConversation({ token: o.token }, { signal: stopped.signal });
          o.onState(res);
          read = true;
          failures = 0;
          if (res.share?.mode !== "live") {
            setStatus("live");
            return;
          }
        }
        for await (const res of o.client.streamSharedConversation({ token: o.token }, { signal: stopped.signal })) {
          if (!res.state) continue;
          setStatus("live");
          failures = 0;
          o.onState(res.state);
        }
        // The server ended the stream (it is stopping): open it again.
      } catch (err) {
        if (stopped.signal.aborted) return;
        if (isShareGone(err)) {
          o.onGone();
          return;
        }
        failures++;
      }
      if (stopped.signal.aborted) return;
      setStatus(failures >= OFFLINE_AFTER ? "offline" : "reconnecting");
      await sleep(backoffDelay(Math.max(0, failures - 1), initial, max));
    }
  }

  void run();
  return () => stopped.abort();
}
