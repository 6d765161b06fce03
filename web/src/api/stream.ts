// Following one conversation: one StreamConversation at a time, reconnected
// with backoff after any drop, resuming with afterSeq (the last applied seq)
// and falling back to a fresh snapshot when resuming does not work.

import { Code, ConnectError } from "@connectrpc/connect";
import type { Event } from "../gen/convo/v1/events_pb";
import type { Action } from "../state/reducer";
import { auth } from "./auth";
import type { ConvoClient } from "./client";

/** connecting: first attempt; live: the stream is open; reconnecting: after a drop; offline: no network or server. */
export type ConnectionStatus = "connecting" | "live" | "reconnecting" | "offline";

export interface FollowOptions {
  client: ConvoClient;
  conversationId: string;
  /** The last applied seq (null: none yet, ask for a snapshot). */
  getSeq: () => bigint | null;
  /** True while applied events wait for a missing earlier one. */
  hasGap: () => boolean;
  dispatch: (a: Action) => void;
  onStatus: (s: ConnectionStatus) => void;
  /** Called once per received event, after it was dispatched. */
  onEvent?: (ev: Event) => void;
  /** The stream stopped for good: the conversation is gone. */
  onNotFound?: () => void;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
}

/** After this many failed attempts in a row the indicator says offline (retries go on). */
const OFFLINE_AFTER = 3;
/** After this many failed resumes in a row, ask for a fresh snapshot instead. */
const SNAPSHOT_AFTER = 2;
/** An open stream that yielded nothing for this long without an error counts as live. */
const LIVE_AFTER_MS = 400;

/** backoffDelay is the wait before attempt n (0-based) of a reconnect: exponential, capped, with jitter. */
export function backoffDelay(n: number, initialMs: number, maxMs: number, random = Math.random): number {
  const base = Math.min(maxMs, initialMs * 2 ** n);
  return Math.round(base * (0.5 + random() * 0.5));
}

/** followConversation streams a conversation until the returned stop function is called. */
export function followConversation(o: FollowOptions): () => void {
  const initial = o.initialBackoffMs ?? 500;
  const max = o.maxBackoffMs ?? 10_000;
  const stopped = new AbortController();
  let wake: (() => void) | null = null;
  let status: ConnectionStatus | null = null;
  const setStatus = (s: ConnectionStatus) => {
    if (s !== status) {
      status = s;
      o.onStatus(s);
    }
  };

  // Wake a waiting retry when the network comes back or the tab is looked at.
  const nudge = () => wake?.();
  let attemptCtl: AbortController | null = null;
  // The browser says the network is gone: an open stream may linger
  // unnoticed, so end it and wait for the network to come back.
  const onOffline = () => {
    setStatus("offline");
    attemptCtl?.abort();
  };
  const isOffline = () => typeof navigator !== "undefined" && navigator.onLine === false;
  const onVisible = () => {
    if (document.visibilityState === "visible") nudge();
  };
  window.addEventListener("online", nudge);
  window.addEventListener("offline", onOffline);
  window.addEventListener("focus", nudge);
  document.addEventListener("visibilitychange", onVisible);

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        wake = null;
        stopped.signal.removeEventListener("abort", done);
        resolve();
      }
      wake = done;
      stopped.signal.addEventListener("abort", done);
    });

  async function run() {
    let failures = 0;
    let resumeFailures = 0;
    let freshSnapshot = false;
    setStatus("connecting");
    while (!stopped.signal.aborted) {
      if (isOffline()) {
        setStatus("offline");
        await sleep(max);
        continue;
      }
      const attempt = new AbortController();
      attemptCtl = attempt;
      const abortAttempt = () => attempt.abort();
      stopped.signal.addEventListener("abort", abortAttempt);
      const seq = freshSnapshot ? null : o.getSeq();
      let received = 0;
      let liveTimer: ReturnType<typeof setTimeout> | undefined;
      let gap = false;
      try {
        const stream = o.client.streamConversation(
          { conversationId: o.conversationId, afterSeq: seq ?? undefined },
          {
            signal: attempt.signal,
            onHeader: () => {
              liveTimer = setTimeout(() => setStatus("live"), LIVE_AFTER_MS);
            },
          },
        );
        for await (const res of stream) {
          received++;
          if (received === 1) {
            clearTimeout(liveTimer);
            setStatus("live");
            failures = 0;
            resumeFailures = 0;
            freshSnapshot = false;
          }
          if (res.kind.case === "snapshot") {
            o.dispatch({ type: "snapshot", snapshot: res.kind.value });
          } else if (res.kind.case === "event") {
            o.dispatch({ type: "event", event: res.kind.value });
            o.onEvent?.(res.kind.value);
            if (o.hasGap()) {
              // One stream delivers in order: a gap means something was
              // lost. Resume from the last applied seq.
              gap = true;
              break;
            }
          }
        }
      } catch (err) {
        if (stopped.signal.aborted) break;
        const e = ConnectError.from(err);
        if (e.code === Code.Unauthenticated) {
          auth.unauthenticated();
          break;
        }
        if (e.code === Code.NotFound) {
          o.onNotFound?.();
          break;
        }
        if (seq !== null && received === 0) {
          resumeFailures++;
          // The server would not resume from seq: start over from a snapshot.
          const refused =
            e.code === Code.InvalidArgument || e.code === Code.OutOfRange || e.code === Code.FailedPrecondition;
          if (refused || resumeFailures >= SNAPSHOT_AFTER) freshSnapshot = true;
        }
      } finally {
        clearTimeout(liveTimer);
        stopped.signal.removeEventListener("abort", abortAttempt);
        attempt.abort();
      }
      if (stopped.signal.aborted) break;
      if (gap) continue;
      // The stream ended or failed: reconnect after a backoff.
      if (received === 0) failures++;
      setStatus(isOffline() || failures >= OFFLINE_AFTER ? "offline" : "reconnecting");
      await sleep(backoffDelay(Math.max(0, failures - 1), initial, max));
    }
  }

  void run();

  return () => {
    stopped.abort();
    window.removeEventListener("online", nudge);
    window.removeEventListener("offline", onOffline);
    window.removeEventListener("focus", nudge);
    document.removeEventListener("visibilitychange", onVisible);
  };
}
