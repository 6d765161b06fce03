import { create } from "@bufbuild/protobuf";
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState, type ReactNode } from "react";
import { errorMessage, type ConvoClient } from "../api/client";
import { stopReplies } from "../api/stop";
import { Preference, SendMessageRequestSchema } from "@convo/client";
import type { Event } from "@convo/client";
import { useConversation } from "@convo/react";
import { activePromptIds, messageBlocks, type ConversationState } from "@convo/client";
import type { MessageState } from "@convo/client";
import { modelLabel } from "../util/format";
import { ComparisonView, type ComparisonSide } from "./ComparisonView";
import { Composer, type SendOptions } from "./Composer";
import { ConnectionIndicator } from "./ConnectionIndicator";
import { MessageView, type MessageActions } from "./MessageView";
import { TraceDialog } from "./TraceDialog";

/** sendRequest builds a SendMessage request, an A/B comparison when asked. */
export function sendRequest(conversationId: string, o: SendOptions) {
  return create(SendMessageRequestSchema, {
    conversationId,
    text: o.text,
    ...(o.compare ? { model: { model: o.compare.modelA }, compareModel: { model: o.compare.modelB } } : {}),
  });
}

export function ConversationView({
  client,
  conversationId,
  focusMessageId,
  onChanged,
  header,
}: {
  client: ConvoClient;
  conversationId: string;
  focusMessageId?: string;
  /** The conversation's title or order may have changed: refresh the list. */
  onChanged: () => void;
  /** Rendered at the start of the header (the menu button on narrow screens). */
  header?: ReactNode;
}) {
  const onEvent = useCallback(
    (ev: Event) => {
      const k = ev.kind.case;
      if (k === "conversationUpdated" || k === "historyCleared") onChanged();
    },
    [onChanged],
  );
  const { state, status, notFound, store } = useConversation(conversationId, { client, onEvent });
  const [error, setError] = useState<string | null>(null);
  const [traceFor, setTraceFor] = useState<string | null>(null);
  const [votes, setVotes] = useState<Record<string, Preference>>({});
  // The model each A/B reply was asked of, by message id.
  const [models, setModels] = useState<Record<string, string>>({});
  const [confirmClear, setConfirmClear] = useState(false);
  const [highlighted, setHighlighted] = useState<string | undefined>(undefined);

  const title = state.conversation?.title || "New conversation";
  useEffect(() => {
    document.title = `${title} · convo`;
  }, [title]);

  // Stick to the bottom while the reader is there.
  const listRef = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const onScroll = () => {
    const el = listRef.current;
    if (el) stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
  };
  useLayoutEffect(() => {
    const el = listRef.current;
    if (el && stick.current && !focusMessageId) el.scrollTop = el.scrollHeight;
  }, [state, focusMessageId]);

  // Scroll to the message a search result pointed at, once it is there.
  const scrolledTo = useRef<string | undefined>(undefined);
  useEffect(() => {
    if (!focusMessageId || scrolledTo.current === focusMessageId || !state.messages[focusMessageId]) return;
    scrolledTo.current = focusMessageId;
    stick.current = false;
    document.getElementById(`m-${focusMessageId}`)?.scrollIntoView({ block: "center" });
    setHighlighted(focusMessageId);
    const t = setTimeout(() => setHighlighted(undefined), 2500);
    return () => clearTimeout(t);
  }, [focusMessageId, state.messages]);

  // The votes of this conversation's comparisons, loaded when there are some.
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

  const active = activePromptIds(state);
  const running = active.length > 0;

  const send = async (o: SendOptions) => {
    setError(null);
    stick.current = true;
    try {
      await client.sendMessage(sendRequest(conversationId, o));
      onChanged();
      return true;
    } catch (err) {
      setError(errorMessage(err));
      return false;
    }
  };

  // Stop cancels every running or queued reply: both sides of an A/B comparison.
  const stop = () => {
    setError(null);
    void stopReplies(client, store.current()).then((err) => err && setError(err));
  };

  const actions: MessageActions = useMemo(
    () => ({
      onFeedback: (messageId, rating, comment) => {
        const before = store.current().messages[messageId]?.feedback;
        store.dispatch({ type: "feedback", messageId, feedback: { rating, comment } });
        client.submitFeedback({ messageId, rating, comment }).catch((err) => {
          store.dispatch({ type: "feedback", messageId, feedback: before });
          setError(errorMessage(err));
        });
      },
      onTrace: (m: MessageState) => setTraceFor(m.id),
    }),
    [client, store],
  );

  const vote = (comparisonId: string, preference: Preference) => {
    const before = votes[comparisonId];
    setVotes((v) => ({ ...v, [comparisonId]: preference }));
    client.voteComparison({ comparisonId, preference }).catch((err) => {
      setVotes((v) => ({ ...v, [comparisonId]: before }));
      setError(errorMessage(err));
    });
  };

  const clear = async () => {
    setConfirmClear(false);
    try {
      await client.clearConversation({ conversationId });
      onChanged();
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  if (notFound) {
    return (
      <main className="main">
        <header className="main-head">
          {header}
          <h1 className="title">Not found</h1>
        </header>
        <div className="empty">
          <p>This conversation does not exist, or it was deleted.</p>
          <a href="/" className="button primary">
            Start a new conversation
          </a>
        </div>
      </main>
    );
  }

  return (
    <main className="main" aria-busy={state.seq === null}>
      <header className="main-head">
        {header}
        <h1 className="title" title={title}>
          {title}
        </h1>
        <ConnectionIndicator status={status} />
        {confirmClear ? (
          <span className="confirm" role="group" aria-label="Confirm clearing the history">
            <span className="small">Clear all messages?</span>
            <button type="button" className="danger small" onClick={() => void clear()}>
              Clear
            </button>
            <button type="button" className="ghost small" onClick={() => setConfirmClear(false)}>
              Cancel
            </button>
          </span>
        ) : (
          <button
            type="button"
            className="ghost small"
            onClick={() => setConfirmClear(true)}
            disabled={state.messageIds.length === 0}
          >
            Clear history
          </button>
        )}
      </header>
      <div className="messages" ref={listRef} onScroll={onScroll}>
        <div className="messages-inner">
          {state.seq === null ? <p className="muted center">Loading…</p> : null}
          {state.seq !== null && state.messageIds.length === 0 ? (
            <p className="muted center">No messages yet. Say something below.</p>
          ) : null}
          {renderMessages(state, actions, votes, vote, highlighted, models)}
        </div>
      </div>
      {error ? (
        <p className="composer-error" role="alert">
          {error}{" "}
          <button type="button" className="ghost small" onClick={() => setError(null)}>
            Dismiss
          </button>
        </p>
      ) : null}
      <Composer onSend={send} onStop={stop} running={running} autoFocus />
      {traceFor ? <TraceDialog client={client} messageId={traceFor} onClose={() => setTraceFor(null)} /> : null}
    </main>
  );
}

function comparisonIds(state: ConversationState): string[] {
  const ids = new Set<string>();
  for (const id of state.messageIds) {
    const c = state.messages[id].comparisonId;
    if (c) ids.add(c);
  }
  return [...ids].sort();
}

function renderMessages(
  state: ConversationState,
  actions: MessageActions,
  votes: Record<string, Preference>,
  onVote: (comparisonId: string, p: Preference) => void,
  highlighted: string | undefined,
  models: Record<string, string>,
): ReactNode[] {
  const out: ReactNode[] = [];
  const shown = new Set<string>();
  for (const id of state.messageIds) {
    const m = state.messages[id];
    if (m.comparisonId) {
      if (shown.has(m.comparisonId)) continue;
      shown.add(m.comparisonId);
      const sides: ComparisonSide[] = state.messageIds
        .map((x) => state.messages[x])
        .filter((x) => x.comparisonId === m.comparisonId)
        .sort((a, b) => a.comparisonSlot.localeCompare(b.comparisonSlot))
        .map((x) => ({ message: x, blocks: messageBlocks(state, x.id), error: state.errors[x.id], model: models[x.id] }));
      out.push(
        <ComparisonView
          key={`cmp-${m.comparisonId}`}
          comparisonId={m.comparisonId}
          sides={sides}
          vote={votes[m.comparisonId]}
          onVote={onVote}
          actions={actions}
          highlightedId={highlighted}
        />,
      );
      continue;
    }
    out.push(
      <MessageView
        key={m.id}
        message={m}
        blocks={messageBlocks(state, m.id)}
        error={state.errors[m.id]}
        actions={actions}
        highlighted={highlighted === m.id}
      />,
    );
  }
  return out;
}
