// Older messages: those a bounded snapshot left out (Snapshot.olderPageToken,
// the server's CONVO_SNAPSHOT_BYTES), loaded a ListMessages page at a time
// and folded in with an "older" action (fold.ts).

import type { CallOptions } from "@connectrpc/connect";
import type { ConvoClient } from "./client.js";
import type { Action, ConversationState } from "./fold.js";

/** hasOlder is true while the state lacks messages before its first one (a page to load). */
export function hasOlder(state: ConversationState): boolean {
  return state.older !== null;
}

/**
 * loadOlder asks for the page of messages just before the first one the
 * state holds and returns the action that puts it in place (reduce it into
 * the same follower's state), or null when the state already holds every
 * message from the first. It rejects with the call's ConnectError.
 */
export async function loadOlder(
  client: ConvoClient,
  state: ConversationState,
  opts: Pick<CallOptions, "signal"> = {},
): Promise<Action | null> {
  const pageToken = state.older;
  if (pageToken === null) return null;
  const res = await client.listMessages({ conversationId: state.conversationId, pageToken }, { signal: opts.signal });
  return { type: "older", pageToken, messages: res.messages, nextPageToken: res.nextPageToken };
}

/**
 * olderLoader returns a function that loads the next older page of the
 * state getState returns into dispatch. Called while a page is loading, it
 * returns that load's promise instead of asking twice. The promise rejects
 * as loadOlder does (nothing is dispatched then).
 */
export function olderLoader(
  client: ConvoClient,
  getState: () => ConversationState,
  dispatch: (a: Action) => void,
): () => Promise<void> {
  let loading: Promise<void> | null = null;
  return () => {
    loading ??= (async () => {
      try {
        const action = await loadOlder(client, getState());
        if (action) dispatch(action);
      } finally {
        loading = null;
      }
    })();
    return loading;
  };
}
