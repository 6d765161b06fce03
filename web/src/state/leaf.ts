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
