// The sidebar's list of conversations: ListConversations, refreshed on an
// interval and when the window gets focus (neither while offline), when the
// browser comes back online, and on request (after the app's own changes
// and on conversationUpdated events of the open conversation). No
// stream per conversation: a browser has only ~6 connections per origin.

import { conversationInfo, errorMessage, type ConversationInfo, type ConvoClient } from "@convo/client";
import { useCallback, useEffect, useRef, useState } from "react";
import { autoRefresh } from "./autoRefresh.js";
import { useClient } from "./provider.js";

const REFRESH_MS = 10_000;
const PAGE_SIZE = 50;

export interface ConversationList {
  items: ConversationInfo[];
  loaded: boolean;
  error: string | null;
  hasMore: boolean;
  refresh: () => void;
  loadMore: () => void;
  /** patch changes one item locally until the next refresh (rename, delete). */
  patch: (id: string, change: Partial<ConversationInfo> | null) => void;
}

/**
 * useConversationList lists the user's conversations, newest first, from
 * the ConvoProvider's client (or the one given).
 */
export function useConversationList(given?: ConvoClient): ConversationList {
  const client = useClient(given, "useConversationList");
  const [items, setItems] = useState<ConversationInfo[]>([]);
  const [loaded, setLoaded] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [nextToken, setNextToken] = useState("");
  const pages = useRef(1);
  const inflight = useRef(0);

  const load = useCallback(async () => {
    const call = ++inflight.current;
    try {
      let all: ConversationInfo[] = [];
      let token = "";
      for (let i = 0; i < pages.current; i++) {
        const res = await client.listConversations({ pageSize: PAGE_SIZE, pageToken: token });
        all = all.concat(res.conversations.map(conversationInfo));
        token = res.nextPageToken;
        if (!token) break;
      }
      if (call !== inflight.current) return; // a newer load answers
      setItems(all);
      setNextToken(token);
      setError(null);
    } catch (err) {
      if (call === inflight.current) setError(errorMessage(err));
    } finally {
      if (call === inflight.current) setLoaded(true);
    }
  }, [client]);

  // Coalesce bursts of refresh requests.
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const refresh = useCallback(() => {
    clearTimeout(timer.current);
    timer.current = setTimeout(() => void load(), 150);
  }, [load]);

  useEffect(() => {
    void load();
    const stop = autoRefresh(() => void load(), REFRESH_MS);
    return () => {
      stop();
      clearTimeout(timer.current);
    };
  }, [load]);

  const loadMore = useCallback(() => {
    pages.current++;
    void load();
  }, [load]);

  const patch = useCallback((id: string, change: Partial<ConversationInfo> | null) => {
    setItems((prev) =>
      change === null ? prev.filter((c) => c.id !== id) : prev.map((c) => (c.id === id ? { ...c, ...change } : c)),
    );
  }, []);

  return { items, loaded, error, hasMore: nextToken !== "", refresh, loadMore, patch };
}
