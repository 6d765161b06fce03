import type { ConversationState, MessageState } from "@convo/client";

/** A single message of the conversation, in order. */
export interface MessageItem {
  kind: "message";
  message: MessageState;
}

/** The replies of an A/B comparison, shown side by side where its first reply is, by slot. */
export interface ComparisonItem {
  kind: "comparison";
  comparisonId: string;
  sides: MessageState[];
}

export type ConversationItem = MessageItem | ComparisonItem;

/**
 * groupMessages is what the conversation shows, in order: each message on
 * its own, but the replies of one comparison together, once, at the place
 * of the first of them, sorted by slot ("a" before "b").
 */
export function groupMessages(state: ConversationState): ConversationItem[] {
  const out: ConversationItem[] = [];
  const shown = new Set<string>();
  for (const id of state.messageIds) {
    const m = state.messages[id];
    if (!m.comparisonId) {
      out.push({ kind: "message", message: m });
      continue;
    }
    if (shown.has(m.comparisonId)) continue;
    shown.add(m.comparisonId);
    const sides = state.messageIds
      .map((x) => state.messages[x])
      .filter((x) => x.comparisonId === m.comparisonId)
      .sort((a, b) => a.comparisonSlot.localeCompare(b.comparisonSlot));
    out.push({ kind: "comparison", comparisonId: m.comparisonId, sides });
  }
  return out;
}

