// One open conversation: its store, its single stream, and its connection status.

import { useEffect, useState, useSyncExternalStore } from "react";
import type { ConvoClient } from "../api/client";
import { followConversation, type ConnectionStatus } from "../api/stream";
import type { Event } from "../gen/convo/v1/events_pb";
import type { ConversationState } from "../state/reducer";
import { ConversationStore } from "../state/store";

export interface OpenConversation {
  state: ConversationState;
  status: ConnectionStatus;
  notFound: boolean;
  store: ConversationStore;
}

export function useConversation(
  client: ConvoClient,
  conversationId: string,
  onEvent: (ev: Event) => void,
): OpenConversation {
  const [store] = useState(() => new ConversationStore(conversationId));
  const [status, setStatus] = useState<ConnectionStatus>("connecting");
  const [notFound, setNotFound] = useState(false);
  const state = useSyncExternalStore(store.subscribe, store.getSnapshot);

  // The latest onEvent without restarting the stream when it changes.
  const [handler] = useState(() => ({ current: onEvent }));
  handler.current = onEvent;

  useEffect(() => {
    return followConversation({
      client,
      conversationId,
      getSeq: store.seq,
      hasGap: store.hasGap,
      dispatch: store.dispatch,
      onStatus: setStatus,
      onEvent: (ev) => handler.current(ev),
      onNotFound: () => setNotFound(true),
    });
  }, [client, conversationId, store, handler]);

  return { state, status, notFound, store };
}
