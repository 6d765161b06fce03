import { activeLeaf, type ConversationState } from "@convo/client";

/**
 * expectedLeaf is the message this tab shows as the conversation's active
 * leaf, which a message sent now names as its parent (SendMessage's
 * parentMessageId, docs/branches.md): the last message of the folded
 * state (slot "a" of a comparison that ends it).
 *
 * sent is the reply this tab's last SendMessage made, until the stream
 * brings it: for a moment after a send the state does not hold it yet,
 * and a second message typed that fast still belongs below it, not below
 * the leaf the state showed before. null: nothing in flight.
 */
export function expectedLeaf(state: ConversationState, sent: string | null): string {
  if (sent && !state.messages[sent]) return sent;
  return activeLeaf(state);
}

/**
 * SentLeaf tracks, for one conversation view, the reply its last send made
 * until the state holds it (expectedLeaf's sent). Once the stream has
 * brought it the state alone says where the leaf is: a regeneration, an
 * edit, a switch or a clear, in this tab or another, may drop that reply
 * from the path afterwards, and naming it then would have the server
 * refuse the next message as if another tab had moved the conversation.
 */
export class SentLeaf {
  private sent: string | null = null;

  /** parent is the parentMessageId of a message sent now from state. */
  parent(state: ConversationState): string {
    this.observe(state);
    return expectedLeaf(state, this.sent);
  }

  /** replied records the reply (slot "a" of a comparison) a send made. */
  replied(state: ConversationState, replyId: string): void {
    this.sent = replyId || null;
    this.observe(state);
  }

  /**
   * observe forgets the reply once state holds it: call it with every
   * state the store publishes.
   */
  observe(state: ConversationState): void {
    if (this.sent && state.messages[this.sent]) this.sent = null;
  }

  /** refused forgets the reply: the server said the leaf moved, and the stream brings where it is. */
  refused(): void {
    this.sent = null;
  }
}
