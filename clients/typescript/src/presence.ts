// Presence: who views a conversation and who types in it. A stream asks for
// it with followConversation's `presence: true` (state.present,
// state.typing); a client reports its user's typing with setTyping, or
// with typingReporter, which keeps within the server's rate.

import type { ConvoClient } from "./client.js";

/**
 * setTyping reports that the caller is typing in the conversation (true;
 * it lasts 6 s on the server) or stopped (false). The server allows 2
 * reports a second per user, in bursts of 5 (resource_exhausted past it):
 * report on a change, or use typingReporter.
 */
export async function setTyping(client: ConvoClient, conversationId: string, typing: boolean): Promise<void> {
  await client.setTyping({ conversationId, typing });
}

/** How often a typingReporter repeats "typing" while its user goes on (a report lasts 6 s). */
export const TYPING_REPEAT_MS = 2_000;

export interface TypingReporter {
  /** Call on every keystroke: reports typing now, and then at most once per TYPING_REPEAT_MS. */
  typed(): void;
  /** Call when the user sent or cleared the draft, or left: reports the end once, if typing was reported. */
  stopped(): void;
}

/**
 * typingReporter turns keystrokes into few typing reports: the first
 * keystroke reports typing, later ones repeat it at most every
 * TYPING_REPEAT_MS, and stopped() reports the end once. A failed report
 * is dropped (presence is a hint; the next one repeats it). `now` is for
 * tests.
 */
export function typingReporter(
  client: ConvoClient,
  conversationId: string,
  now: () => number = Date.now,
): TypingReporter {
  let lastSent: number | null = null;
  const report = (typing: boolean) => {
    setTyping(client, conversationId, typing).catch(() => {});
  };
  return {
    typed() {
      const t = now();
      if (lastSent !== null && t - lastSent < TYPING_REPEAT_MS) return;
      lastSent = t;
      report(true);
    },
    stopped() {
      if (lastSent === null) return;
      lastSent = null;
      report(false);
    },
  };
}
