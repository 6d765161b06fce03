import { useEffect, useMemo, useState } from "react";
import { errorMessage, type ConvoClient } from "../api/client";
import { Preference, type ConversationState } from "@convo/client";
import { modelLabel } from "../util/format";

/**
 * useComparisonVotes loads the votes of a conversation's A/B comparisons
 * (and the model each reply was asked of) when it has some, and votes:
 * optimistically, undone with `onError` when the server refuses.
 */
export function useComparisonVotes(
  client: ConvoClient,
  conversationId: string,
  state: ConversationState,
  onError: (message: string) => void,
): {
  votes: Record<string, Preference>;
  models: Record<string, string>;
  vote: (comparisonId: string, preference: Preference) => void;
} {
  const [votes, setVotes] = useState<Record<string, Preference>>({});
  // The model each A/B reply was asked of, by message id.
  const [models, setModels] = useState<Record<string, string>>({});

  const comparisonKey = useMemo(() => comparisonIds(state).join(","), [state]);
  useEffect(() => {
    if (!comparisonKey) return;
    let cancelled = false;
    client
      .listComparisons({ conversationId, pageSize: 100 })
      .then((res) => {
        if (cancelled) return;
        const v: Record<string, Preference> = {};
        const m: Record<string, string> = {};
        for (const c of res.comparisons) {
          if (c.preference !== Preference.UNSPECIFIED) v[c.id] = c.preference;
          for (const side of [c.a, c.b]) if (side) m[side.messageId] = modelLabel(side.modelConfig);
        }
        setVotes((prev) => ({ ...v, ...prev }));
        setModels((prev) => ({ ...prev, ...m }));
      })
      .catch(() => {
        /* votes are a nicety: the buttons still work */
      });
    return () => {
      cancelled = true;
    };
  }, [client, conversationId, comparisonKey]);

  const vote = (comparisonId: string, preference: Preference) => {
    const before = votes[comparisonId];
    setVotes((v) => ({ ...v, [comparisonId]: preference }));
    client.voteComparison({ comparisonId, preference }).catch((err) => {
      setVotes((v) => ({ ...v, [comparisonId]: before }));
      onError(errorMessage(err));
    });
  };
  return { votes, models, vote };
}

/** comparisonIds lists the ids of the state's comparisons, sorted. */
export function comparisonIds(state: ConversationState): string[] {
  const ids = new Set<string>();
  for (const id of state.messageIds) {
    const c = state.messages[id].comparisonId;
    if (c) ids.add(c);
  }
  return [...ids].sort();
}
