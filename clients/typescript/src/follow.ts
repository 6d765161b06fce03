// Following one conversation: one StreamConversation at a time, reconnected
// with backoff after any drop, resuming with afterSeq (the last applied seq)
// and falling back to a fresh snapshot when resuming does not work.

import { Code, ConnectError } from "@connectrpc/connect";
import type { Event } from "./gen/convo/v1/events_pb.js";
import { hasGap, initialState, reduce, resumeSeq, type Action, type ConversationState } from "./fold.js";
import type { ConvoClient } from "./client.js";
import { olderLoader } from "./older.js";

/**
 * connecting: first attempt; live: the stream is open; reconnecting: after
 * a drop; offline: no network or server (retries go on); unauthenticated:
 * the server refused the credentials (no retry: get a new token, follow
 * again); notFound: the conversation does not exist or is not the user's
 * (no retry).
 */
export type ConnectionStatus = "connecting" | "live" | "reconnecting" | "offline" | "unauthenticated" | "notFound";

export interface FollowOptions {
  client: ConvoClient;
  conversationId: string;
  /** Where a dropped stream resumes: the last applied seq, or null for a snapshot (none yet, or a snapshot's replay may be incomplete: resumeSeq). */
  getSeq: () => bigint | null;
  /** True while applied events wait for a missing earlier one. */
  hasGap: () => boolean;
  /** True when the state contradicted an event and needs a fresh snapshot. */
  needsSnapshot?: () => boolean;
  dispatch: (a: Action) => void;
  onStatus: (s: ConnectionStatus) => void;
  /** Called once per received event, after it was dispatched. */
  onEvent?: (ev: Event) => void;
  /** The stream stopped for good: the conversation is gone. */
  onNotFound?: () => void;
  /** The stream stopped for good: the server refused the credentials. */
  onUnauthenticated?: () => void;
  /**
   * Ask for the events of pauses and the snapshot's pendingInputs
   * (StreamConversationRequest.includePauseEvents): the fold keeps the
   * open input requests in state.inputs. Default true; false gets a
   * messageUpdated in place of each such event.
   */
  includePauseEvents?: boolean;
  /**
   * Ask for presence (StreamConversationRequest.includePresence): the
   * caller counts as viewing while the stream is open, and the fold keeps
   * who views and who types in state.present and state.typing. Default
   * false.
   */
  presence?: boolean;
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

/**
 * follow streams a conversation into o.dispatch until the returned stop
 * function is called: one StreamConversation at a time, reconnected with
 * backoff and jitter after a drop, resumed with afterSeq = the last applied
 * seq, and started over from a snapshot when resuming fails or the state
 * needs one. It stops by itself on NotFound and Unauthenticated. In a
 * browser it also reconnects at once when the network comes back or the
 * tab is shown again.
 */
export function follow(o: FollowOptions): () => void {
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
  const browser = typeof window !== "undefined" && typeof document !== "undefined";
  if (browser) {
    window.addEventListener("online", nudge);
    window.addEventListener("offline", onOffline);
    window.addEventListener("focus", nudge);
    document.addEventListener("visibilitychange", onVisible);
  }

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
          {
            conversationId: o.conversationId,
            afterSeq: seq ?? undefined,
            includePauseEvents: o.includePauseEvents ?? true,
            // The fold applies branchSwitched: a change of the active path
            // arrives live instead of ending the stream (docs/events.md, "Branches").
            includeBranches: true,
            includePresence: o.presence ?? false,
          },
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
          } else if (res.kind.case === "presence") {
            o.dispatch({ type: "presence", presence: res.kind.value });
          } else if (res.kind.case === "event") {
            o.dispatch({ type: "event", event: res.kind.value });
            o.onEvent?.(res.kind.value);
            if (o.needsSnapshot?.()) {
              // The state contradicts the stream: rebuild it.
              freshSnapshot = true;
              gap = true;
              break;
            }
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
          setStatus("unauthenticated");
          o.onUnauthenticated?.();
          break;
        }
        if (e.code === Code.NotFound) {
          setStatus("notFound");
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
    if (browser) {
      window.removeEventListener("online", nudge);
      window.removeEventListener("offline", onOffline);
      window.removeEventListener("focus", nudge);
      document.removeEventListener("visibilitychange", onVisible);
    }
  };
}

/** A folded state of a followed conversation, with the connection's status. */
export interface FollowUpdate {
  state: ConversationState;
  status: ConnectionStatus;
  /**
   * loadOlder loads the page of messages before the first one the state
   * holds (while state.older is set: a bounded snapshot left them out);
   * the next update has them. Called while a page loads, it waits for that
   * one. It rejects with the call's ConnectError.
   */
  loadOlder: () => Promise<void>;
}

export interface FollowConversationOptions {
  /** Aborting it ends the iteration and closes the stream (the server releases its subscription). */
  signal?: AbortSignal;
  /** Resume after this seq (a state the caller already holds) instead of starting from a snapshot. */
  afterSeq?: bigint;
  /** The state to resume from, when afterSeq is given (default: empty, which a resume then fills with events). */
  initial?: ConversationState;
  /** Ask for the events of pauses (default true): see FollowOptions.includePauseEvents. */
  includePauseEvents?: boolean;
  /** Ask for presence (default false): see FollowOptions.presence. */
  presence?: boolean;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
}

/**
 * followConversation follows conversation id and yields its folded state
 * after every change, and on every change of the connection's status.
 * States that pile up while the consumer is busy are skipped: the consumer
 * always gets the latest. It reconnects by itself (see follow) and ends
 * when opts.signal aborts, or after a final update with status
 * "unauthenticated" or "notFound". Each update's loadOlder pages in the
 * messages a bounded snapshot left out.
 */
export async function* followConversation(
  client: ConvoClient,
  id: string,
  opts: FollowConversationOptions = {},
): AsyncGenerator<FollowUpdate, void, undefined> {
  let state = opts.initial ?? initialState(id);
  if (opts.afterSeq !== undefined) state = { ...state, seq: opts.afterSeq };
  let status: ConnectionStatus = "connecting";
  let dirty = true;
  let ended = false;
  let wake: (() => void) | null = null;
  const changed = () => {
    dirty = true;
    wake?.();
  };
  const dispatch = (a: Action) => {
    const next = reduce(state, a);
    if (next !== state) {
      state = next;
      changed();
    }
  };
  const loadOlder = olderLoader(client, () => state, dispatch);
  const stop = follow({
    client,
    conversationId: id,
    getSeq: () => resumeSeq(state),
    hasGap: () => hasGap(state),
    needsSnapshot: () => state.desync,
    dispatch,
    onStatus: (s) => {
      status = s;
      if (s === "unauthenticated" || s === "notFound") ended = true;
      changed();
    },
    includePauseEvents: opts.includePauseEvents,
    presence: opts.presence,
    initialBackoffMs: opts.initialBackoffMs,
    maxBackoffMs: opts.maxBackoffMs,
  });
  const abort = () => {
    ended = true;
    wake?.();
  };
  opts.signal?.addEventListener("abort", abort);
  try {
    while (!opts.signal?.aborted) {
      if (dirty) {
        dirty = false;
        yield { state, status, loadOlder };
        continue;
      }
      if (ended) break;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      wake = null;
    }
  } finally {
    stop();
    opts.signal?.removeEventListener("abort", abort);
  }
}
