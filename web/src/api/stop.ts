// Stopping a conversation's replies.

import { Code, ConnectError } from "@connectrpc/connect";
import { activePromptIds, type ConversationState } from "@convo/client";
import { errorMessage, type ConvoClient } from "./client";

/**
 * stopReplies cancels every prompt of the conversation still queued or
 * running, at once: both sides of an A/B comparison, not only the newest.
 * A prompt that ended in the meantime (FailedPrecondition) is not an error.
 * It resolves with the first other failure's message, or null.
 */
export async function stopReplies(client: Pick<ConvoClient, "cancelPrompt">, state: ConversationState): Promise<string | null> {
  const results = await Promise.allSettled(activePromptIds(state).map((promptId) => client.cancelPrompt({ promptId })));
  for (const r of results) {
    if (r.status === "rejected" && ConnectError.from(r.reason).code !== Code.FailedPrecondition) {
      return errorMessage(r.reason);
    }
  }
  return null;
}
