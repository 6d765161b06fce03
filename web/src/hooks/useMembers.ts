import { useCallback, useEffect, useState } from "react";
import { errorMessage, type ConvoClient } from "../api/client";
import type { Member } from "@convo/client";

/** Members: a conversation's members as ListMembers gives them (the owner first), and a refresh. */
export interface Members {
  /** null until the first answer. */
  list: Member[] | null;
  error: string | null;
  /** refresh reads the list again (call it on memberAdded and memberRemoved). */
  refresh: () => void;
}

/**
 * useMembers reads the conversation's members once, and again on refresh;
 * an answer that arrives after a later request started is dropped.
 */
export function useMembers(client: ConvoClient, conversationId: string): Members {
  const [list, setList] = useState<Member[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    let current = true;
    client
      .listMembers({ conversationId })
      .then((res) => {
        if (!current) return;
        setList(res.members);
        setError(null);
      })
      .catch((err) => current && setError(errorMessage(err)));
    return () => {
      current = false;
    };
  }, [client, conversationId, generation]);
  const refresh = useCallback(() => setGeneration((g) => g + 1), []);
  return { list, error, refresh };
}
