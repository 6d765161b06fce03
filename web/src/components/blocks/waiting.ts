import { createContext } from "react";

/**
 * PersonWaits holds the ids of the tool calls that wait for a person: an
 * approval or a question still open. Their tool panels say "Waiting for
 * you" instead of showing a running call (a client tool runs in a
 * browser, not by a person: it shows as running).
 */
export const PersonWaits = createContext<ReadonlySet<string>>(new Set());

/** waitingForPerson is PersonWaits' value for a conversation's open input requests. */
export function waitingForPerson(inputs: readonly { toolCallId: string; kind: string }[]): ReadonlySet<string> {
  return new Set(inputs.filter((i) => i.kind === "approval" || i.kind === "question").map((i) => i.toolCallId));
}
