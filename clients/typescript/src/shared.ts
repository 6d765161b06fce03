// One stream per conversation for all the tabs of an origin. Over plain
// HTTP/1.1 a browser opens about six connections per host and every open
// stream holds one, so ten tabs of a chat app each following a
// conversation would leave four of them waiting. followShared elects one
// tab per conversation (a Web Lock) to hold the stream; it sends what it
// receives to the other tabs over a BroadcastChannel, and the state it holds
// to a tab that joins. When the leading tab closes, another takes the lock
// and resumes the stream from its own state (afterSeq): nothing is lost.

import type { ConversationState } from "./fold.js";
import { follow, type ConnectionStatus, type FollowOptions } from "./follow.js";

export interface FollowSharedOptions extends FollowOptions {
  /** The follower's current state (sent to tabs that join). */
  getState: () => ConversationState;
  /** Separates servers: tabs share a stream only for the same key (e.g. the base URL). */
  key?: string;
}

type Message =
  | { type: "hello" }
  | { type: "state"; state: ConversationState; status: ConnectionStatus }
  | { type: "action"; action: Parameters<FollowOptions["dispatch"]>[0] }
  | { type: "status"; status: ConnectionStatus };

interface Locks {
  request(name: string, options: { signal?: AbortSignal }, callback: () => Promise<void>): Promise<void>;
}

/** sharing reports whether this environment can share streams between tabs (Web Locks and BroadcastChannel). */
export function sharing(): boolean {
  const locks = typeof navigator !== "undefined" ? (navigator as { locks?: Locks }).locks : undefined;
  return typeof BroadcastChannel !== "undefined" && locks !== undefined;
}

/**
 * followShared is follow for a browser with several tabs: the tabs of one
 * origin following one conversation share a single stream. Where Web Locks
 * or BroadcastChannel are missing (an insecure origin other than
 * localhost, an old browser, Node), it is follow.
 */
export function followShared(o: FollowSharedOptions): () => void {
  if (!sharing()) return follow(o);
  const locks = (navigator as unknown as { locks: Locks }).locks;
  const name = `convo:${o.key ?? ""}:${o.conversationId}`;
  const channel = new BroadcastChannel(name);
  const stopped = new AbortController();
  let leading = false;
  let status: ConnectionStatus = "connecting";
  const post = (m: Message) => channel.postMessage(m);

  channel.onmessage = (e: MessageEvent<Message>) => {
    const m = e.data;
    if (leading) {
      if (m.type === "hello") post({ type: "state", state: o.getState(), status });
      return;
    }
    switch (m.type) {
      case "state":
        o.dispatch({ type: "replace", state: m.state });
        o.onStatus(m.status);
        break;
      case "action":
        o.dispatch(m.action);
        if (m.action.type === "event") o.onEvent?.(m.action.event);
        break;
      case "status":
        o.onStatus(m.status);
        if (m.status === "notFound") o.onNotFound?.();
        break;
    }
  };
  o.onStatus(status);
  post({ type: "hello" });

  locks
    .request(`convo-stream:${name}`, { signal: stopped.signal }, async () => {
      leading = true;
      const stop = follow({
        ...o,
        dispatch: (a) => {
          o.dispatch(a);
          post({ type: "action", action: a });
        },
        onStatus: (s) => {
          status = s;
          o.onStatus(s);
          post({ type: "status", status: s });
        },
      });
      await new Promise<void>((resolve) => stopped.signal.addEventListener("abort", () => resolve()));
      stop();
    })
    .catch(() => {
      // Stopped before this tab led: nothing to release.
    });

  return () => {
    stopped.abort();
    channel.close();
  };
}
