import { useEffect, useState } from "react";
import { errorMessage, type ConvoClient } from "../api/client";
import type { Share } from "@convo/client";

/** Shares: a conversation's share links as ListShares gives them (newest first, never a token). */
export interface Shares {
  /** null until the first answer. */
  list: Share[] | null;
  error: string | null;
}

/**
 * useShares reads the conversation's shares, and again whenever changes
 * moves: a count that the conversation's shareCreated and shareRevoked
 * events bump, in the tab that made the change as in every other (one
 * read per change). An answer that arrives after a later request started
 * is dropped.
 */
export function useShares(client: Pick<ConvoClient, "listShares">, conversationId: string, changes: number): Shares {
  const [list, setList] = useState<Share[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let current = true;
    client
      .listShares({ conversationId })
      .then((res) => {
        if (!current) return;
        setList(res.shares);
        setError(null);
      })
      .catch((err) => current && setError(errorMessage(err)));
    return () => {
      current = false;
    };
  }, [client, conversationId, changes]);
  return { list, error };
}
