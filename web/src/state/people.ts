// People in a shared conversation: how the app names a message's sender,
// who else is here, and what the typing line says. The caller's own id
// comes from the token (tokenSubject); null when it cannot be told.

import type { MessageState } from "@convo/client";

/**
 * senderName names a user message's sender: "You" for the caller's own,
 * the sender's id for another member's. A message without a sender (sent
 * before conversations had members) is the owner's: "You" for the owner,
 * "Owner" for a member. With the caller unknown (me null) every sender is
 * named by id.
 */
export function senderName(m: Pick<MessageState, "senderId">, me: string | null, role: string | undefined): string {
  if (!m.senderId) return !role || role === "owner" ? "You" : "Owner";
  return m.senderId === me ? "You" : m.senderId;
}

/** others is the list without the caller (presence and typing name only the others). */
export function others(ids: readonly string[], me: string | null): string[] {
  return ids.filter((id) => id !== me);
}

/** initials is what an avatar shows: the first letters of up to two words of the id ("alice.smith" → "AS"). */
export function initials(id: string): string {
  const words = id.split(/[^\p{L}\p{N}]+/u).filter(Boolean);
  const letters = (words.length > 1 ? [words[0], words[1]] : [words[0] ?? id]).map((w) => [...w][0] ?? "");
  return letters.join("").toUpperCase() || "?";
}

/** typingLine is the line under the messages: "", "alice is typing…", "alice and bob are typing…", "3 people are typing…". */
export function typingLine(ids: readonly string[]): string {
  if (ids.length === 0) return "";
  if (ids.length === 1) return `${ids[0]} is typing…`;
  if (ids.length === 2) return `${ids[0]} and ${ids[1]} are typing…`;
  return `${ids.length} people are typing…`;
}

/** roleLabel says a role to a reader. */
export function roleLabel(role: string): string {
  return role === "participant" ? "Participant" : role === "viewer" ? "Viewer" : role === "owner" ? "Owner" : role;
}

/** mayTakeBack: a queued message may be taken back by its sender, or by the owner (a viewer never). */
export function mayTakeBack(m: Pick<MessageState, "senderId" | "queued" | "role">, me: string | null, role: string | undefined): boolean {
  if (!m.queued || m.role !== "user" || role === "viewer") return false;
  if (!role || role === "owner") return true;
  return Boolean(m.senderId) && m.senderId === me;
}
