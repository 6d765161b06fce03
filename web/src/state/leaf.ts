import { activeLeaf, type ConversationState } from "@convo/client";

/**
 * SentReplies are the replies of this tab's latest messages, each sent
 * below the one before (replies, oldest first), and the leaf the first was
 * sent below: what the tab's state may not show yet.
 */
export interface SentReplies {
  below: string;
  replies: string[];
}

/**
 * expectedLeaf is the message this tab shows as the conversation's active
 * leaf, which a message sent now names as its parent (SendMessage's
 * parentMessageId, docs/branches.md): the last message of the folded
 * state (slot "a" of a comparison that ends it); "" (no check) when the
 * state shows no message.
 *
 * For a moment after a send the state does not hold its reply yet, and a
 * message typed that fast still belongs below it: while the state shows
 * the leaf the tab's sends began below, or one of their replies but the
 * last, the state is behind them (each of those has a message below it
 * now, so it is never the leaf again), and the last reply is the leaf.
 * Once the state shows another leaf, the stream brought the sends and
 * then a change (a regeneration, an edit, a switch, in this tab or
 * another) that moved the leaf away from the last reply: the state's leaf
 * is the one the user sees and writes below.
 */
export function expectedLeaf(state: ConversationState, sent: SentReplies | null): string {
  const shown = activeLeaf(state);
  if (sent === null || shown === "") return shown;
  const last = sent.replies[sent.replies.length - 1];
  return shown === sent.below || sent.replies.includes(shown) ? last : shown;
}

/**
 * afterSend is what the tab sent once a message named parent (expectedLeaf
 * of state, read before the send) and made reply: the reply joins the
 * sends the state has not caught up with, or starts them when the state
 * held the parent (or the message went below none, "").
 */
export function afterSend(state: ConversationState, sent: SentReplies | null, parent: string, reply: string): SentReplies | null {
  if (reply === "") return null;
  const last = sent?.replies[sent.replies.length - 1];
  if (sent && parent !== "" && parent === last && !state.messages[parent]) return { below: sent.below, replies: [...sent.replies, reply] };
  return { below: parent, replies: [reply] };
}
