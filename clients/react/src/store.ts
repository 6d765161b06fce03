// ConversationStore holds one conversation's state outside React, so the
// stream reads the last applied seq synchronously, and publishes it to React
// at most once per frame however fast deltas arrive.

import {
  hasGap,
  initialState,
  loadOlder,
  reduce,
  resumeSeq,
  type Action,
  type ConversationState,
  type ConvoClient,
} from "@convo/client";

export class ConversationStore {
  private state: ConversationState;
  private published: ConversationState;
  private listeners = new Set<() => void>();
  private scheduled = false;
  private loadingOlder: Promise<void> | null = null;

  constructor(conversationId: string) {
    this.state = initialState(conversationId);
    this.published = this.state;
  }

  /** current is the latest state, including changes not yet published. */
  current = (): ConversationState => this.state;
  /** seq is where a dropped stream resumes (resumeSeq), or null for a fresh snapshot. */
  seq = (): bigint | null => resumeSeq(this.state);
  hasGap = (): boolean => hasGap(this.state);
  needsSnapshot = (): boolean => this.state.desync;

  dispatch = (a: Action): void => {
    const next = reduce(this.state, a);
    if (next === this.state) return;
    this.state = next;
    this.schedule();
  };

  /**
   * loadOlder loads the page of messages before the first one the state
   * holds (ListMessages with state.older) into the state; it does nothing
   * when there is none. Called while a page loads, it returns that load
   * instead of asking twice. It rejects with the call's ConnectError.
   */
  loadOlder = (client: ConvoClient): Promise<void> => {
    this.loadingOlder ??= (async () => {
      try {
        const action = await loadOlder(client, this.state);
        if (action) this.dispatch(action);
      } finally {
        this.loadingOlder = null;
      }
    })();
    return this.loadingOlder;
  };

  /** getSnapshot and subscribe are for useSyncExternalStore. */
  getSnapshot = (): ConversationState => this.published;
  subscribe = (l: () => void): (() => void) => {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  };

  private schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    const publish = () => {
      if (!this.scheduled) return;
      this.scheduled = false;
      this.published = this.state;
      for (const l of this.listeners) l();
    };
    // A frame when visible; a timer as well, since hidden tabs get no frames.
    if (typeof requestAnimationFrame !== "undefined") requestAnimationFrame(publish);
    setTimeout(publish, 50);
  }
}
