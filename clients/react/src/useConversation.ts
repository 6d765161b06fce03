// One open conversation: its store, its single stream, and its connection
// status, with the calls that act on it.

import {
  activePromptIds,
  cancelReply,
  errorMessage,
  follow,
  followShared,
  sendMessage,
  type ConnectionStatus,
  type ConversationState,
  type ConvoClient,
  type Event,
  type SendMessageResponse,
  type SendOptions,
} from "@convo/client";
import { useCallback, useEffect, useState, useSyncExternalStore } from "react";
import { useClient } from "./provider.js";
import { ConversationStore } from "./store.js";

export interface UseConversation {
  /** The folded state, published at most once per animation frame. */
  state: ConversationState;
  status: ConnectionStatus;
  /** The last failed call's message (send, cancel or loadOlder), or null. */
  error: string | null;
  /** True once the conversation turned out not to exist (or not to be the user's). */
  notFound: boolean;
  /** send appends the user's text to this conversation and queues the reply. */
  send: (text: string, o?: Omit<SendOptions, "conversationId">) => Promise<SendMessageResponse | null>;
  /** cancel stops every reply of this conversation still queued or running. */
  cancel: () => Promise<void>;
  /**
   * hasOlder is true while messages before the first one in state are not
   * loaded: the server's snapshot holds only the latest messages
   * (CONVO_SNAPSHOT_BYTES) and loadOlder pages the others in.
   */
  hasOlder: boolean;
  /**
   * loadOlder loads the page of messages before the first one in state.
   * Called while a page loads, it waits for that one instead of asking
   * twice. A failure sets error (it never rejects).
   */
  loadOlder: () => Promise<void>;
  /** The store behind state (for optimistic changes: store.dispatch). */
  store: ConversationStore;
}

export interface UseConversationOptions {
  /** Called once per event received, outside React's render. */
  onEvent?: (ev: Event) => void;
  /** A client other than the ConvoProvider's. */
  client?: ConvoClient;
  /**
   * share (default true): the tabs of this origin that follow the same
   * conversation share one stream (followShared), so that many tabs fit in
   * a browser's six connections per host over HTTP/1.1.
   */
  share?: boolean;
}

/**
 * useConversation follows conversation id: one StreamConversation,
 * reconnected and resumed by itself (see followConversation) and shared by
 * the tabs of the origin that follow the same conversation, folded into a
 * state that re-renders the component at most once per animation frame,
 * however fast deltas arrive.
 */
export function useConversation(id: string, o: UseConversationOptions = {}): UseConversation {
  const client = useClient(o.client, "useConversation");
  const [store] = useState(() => new ConversationStore(id));
  const [status, setStatus] = useState<ConnectionStatus>("connecting");
  const [notFound, setNotFound] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const state = useSyncExternalStore(store.subscribe, store.getSnapshot, store.getSnapshot);

  // The latest onEvent without restarting the stream when it changes.
  const [handler] = useState(() => ({ current: o.onEvent }));
  handler.current = o.onEvent;

  const share = o.share ?? true;
  useEffect(() => {
    const opts = {
      client,
      conversationId: id,
      getSeq: store.seq,
      hasGap: store.hasGap,
      needsSnapshot: store.needsSnapshot,
      dispatch: store.dispatch,
      onStatus: setStatus,
      onEvent: (ev: Event) => handler.current?.(ev),
      onNotFound: () => setNotFound(true),
    };
    return share ? followShared({ ...opts, getState: store.current }) : follow(opts);
  }, [client, id, store, handler, share]);

  const send = useCallback(
    async (text: string, so: Omit<SendOptions, "conversationId"> = {}) => {
      try {
        const res = await sendMessage(client, text, { ...so, conversationId: id });
        setError(null);
        return res;
      } catch (err) {
        setError(errorMessage(err));
        return null;
      }
    },
    [client, id],
  );

  const cancel = useCallback(async () => {
    const ids = activePromptIds(store.current());
    const results = await Promise.allSettled(ids.map((p) => cancelReply(client, p)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    setError(failed ? errorMessage(failed.reason) : null);
  }, [client, store]);

  const loadOlder = useCallback(async () => {
    try {
      await store.loadOlder(client);
      setError(null);
    } catch (err) {
      setError(errorMessage(err));
    }
  }, [client, store]);

  return { state, status, error, notFound, send, cancel, hasOlder: state.older !== null, loadOlder, store };
}
