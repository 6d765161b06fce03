import { create } from "@bufbuild/protobuf";
import { useCallback, useEffect, useMemo, useRef, useState, type ReactNode } from "react";
import { errorMessage, type ConvoClient } from "../api/client";
import { stopReplies } from "../api/stop";
import { SendMessageRequestSchema, activePromptIds, isLeafMoved, messageBlocks, type ConversationState } from "@convo/client";
import type { Event, MessageState, Preference } from "@convo/client";
import { useConversation, useUploads, type ClientToolRun, type PendingInput } from "@convo/react";
import { clientTools } from "../api/clientTools";
import { ClientToolStatus, PauseCard, type PauseActions } from "./PauseCard";
import { useComparisonVotes } from "../hooks/useComparisonVotes";
import { useStickToBottom } from "../hooks/useStickToBottom";
import { groupMessages } from "../state/groupMessages";
import { afterSend, expectedLeaf, type SentReplies } from "../state/leaf";
import { useFileDrop } from "./Attachments";
import { ComparisonView } from "./ComparisonView";
import { Composer, type SendOptions } from "./Composer";
import { ConversationHeader } from "./ConversationHeader";
import { MembersDialog } from "./MembersDialog";
import { ShareDialog } from "./ShareDialog";
import { TypingIndicator } from "./Presence";
import { auth, tokenSubject } from "../api/auth";
import { useMembers } from "../hooks/useMembers";
import { mayTakeBack, others, senderName } from "../state/people";
import { navigate } from "../router";
import { MessageView, type MessageActions } from "./MessageView";
import { OlderMessages } from "./OlderMessages";
import { TraceDialog } from "./TraceDialog";
import { PersonWaits, waitingForPerson } from "./blocks/waiting";

/**
 * sendRequest builds a SendMessage request, an A/B comparison when asked;
 * parentMessageId is the leaf the tab shows (expectedLeaf), which the
 * server checks is still the active one ("": no check).
 */
export function sendRequest(conversationId: string, o: SendOptions, parentMessageId = "") {
  return create(SendMessageRequestSchema, {
    conversationId,
    text: o.text,
    fileIds: o.fileIds ?? [],
    parentMessageId,
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
  const sent = useRef<SentReplies | null>(null);
  const members = useMembers(client, conversationId);
  const refreshMembers = members.refresh;
  // Bumped by each share link made or revoked: the Share dialog's list reads again.
  const [shareChanges, setShareChanges] = useState(0);
  const onEvent = useCallback(
    (ev: Event) => {
      const k = ev.kind.case;
      if (k === "conversationUpdated" || k === "historyCleared") onChanged();
      if (k === "memberAdded" || k === "memberRemoved") refreshMembers();
      if (k === "shareCreated" || k === "shareRevoked") setShareChanges((n) => n + 1);
      // A queued message taken back (here or by another member) moved the
      // path: its reply is no leaf any more, and the state's leaf is the
      // one to send below (expectedLeaf).
      if (k === "branchSwitched") sent.current = null;
    },
    [onChanged, refreshMembers],
  );
  const conv = useConversation(conversationId, { client, onEvent, clientTools, presence: true });
  // Who the caller is, as the server knows them (the token's subject).
  const me = useMemo(() => tokenSubject(auth.token()), []);
  const [membersOpen, setMembersOpen] = useState(false);
  const [shareOpen, setShareOpen] = useState(false);
  const uploads = useUploads(client);
  const drop = useFileDrop(uploads.add);
  const { state, status, notFound, store, loadOlder, pending, clientToolRuns, approve, deny, answer } = conv;
  const { edit, regenerate, switchTo, writing, typed, stoppedTyping } = conv;
  const role = state.conversation?.role ?? "owner";
  const people: People = useMemo(() => ({ me, role }), [me, role]);
  const [error, setError] = useState<string | null>(null);
  const [traceFor, setTraceFor] = useState<string | null>(null);
  const [highlighted, setHighlighted] = useState<string | undefined>(undefined);
  const { votes, models, vote } = useComparisonVotes(client, conversationId, state, setError);
  // Why each failed reply failed: the fold has it from the snapshot, a
  // page, a branchSwitched or the live events alike.
  const reasons = state.errors;
  const first = state.messageIds[0];
  const scroll = useStickToBottom<HTMLDivElement>(state, Boolean(focusMessageId), first && `m-${first}`);

  const title = state.conversation?.title || "New conversation";
  useEffect(() => {
    document.title = `${title} · convo`;
  }, [title]);

  // Scroll to the message a search result pointed at, once it is there.
  const scrolledTo = useRef<string | undefined>(undefined);
  useEffect(() => {
    if (!focusMessageId || scrolledTo.current === focusMessageId || !state.messages[focusMessageId]) return;
    scrolledTo.current = focusMessageId;
    scroll.release();
    document.getElementById(`m-${focusMessageId}`)?.scrollIntoView({ block: "center" });
    setHighlighted(focusMessageId);
    const t = setTimeout(() => setHighlighted(undefined), 2500);
    return () => clearTimeout(t);
  }, [focusMessageId, state.messages, scroll]); // scroll is the same on every render

  // A linked message older than those loaded: page back until it is there
  // (once per page: a failed load is not retried on every event).
  const focusMissing = Boolean(focusMessageId) && state.seq !== null && !state.messages[focusMessageId ?? ""];
  useEffect(() => {
    if (focusMissing && state.older !== null) void loadOlder();
  }, [focusMissing, state.older, loadOlder]);

  const running = activePromptIds(state).length > 0;

  // The pauses of each reply: its open requests, and the client tools this tab ran.
  const pauseActions: PauseActions = useMemo(() => ({ approve, deny, answer }), [approve, deny, answer]);
  useEffect(() => {
    if (conv.error) setError(conv.error);
  }, [conv.error]);
  const pauses = useMemo(
    () => pausesByMessage(state, pending, clientToolRuns, pauseActions),
    [state, pending, clientToolRuns, pauseActions],
  );
  const personWaits = useMemo(() => waitingForPerson(state.inputs), [state.inputs]);

  // The message below the leaf this tab shows: the server refuses it when
  // another tab moved the conversation on meanwhile (switched, edited,
  // sent), and the stream then brings the conversation as it now is, the
  // text staying in the composer.
  const send = async (o: SendOptions) => {
    setError(null);
    scroll.stick();
    const shown = store.current();
    const parent = expectedLeaf(shown, sent.current);
    try {
      const res = await client.sendMessage(sendRequest(conversationId, o, parent));
      sent.current = afterSend(shown, sent.current, parent, res.assistantMessageId);
      stoppedTyping();
      onChanged();
      return true;
    } catch (err) {
      if (isLeafMoved(err)) sent.current = null;
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
      // The stream brings the new path (branchSwitched); a refusal shows
      // as the hook's error.
      onEdit: async (messageId, text, fileIds) => {
        scroll.stick();
        const ok = await edit(messageId, text, fileIds);
        if (ok) onChanged();
        return ok;
      },
      onRegenerate: (messageId) => {
        scroll.stick();
        void regenerate(messageId);
      },
      onSwitch: (messageId, siblingIndex) => void switchTo(messageId, siblingIndex),
      // The stream brings the change (a branchSwitched); a refusal (its reply started) shows.
      onTakeBack: (messageId) => {
        client
          .deleteQueuedMessage({ messageId })
          .then(() => {
            sent.current = null;
          })
          .catch((err) => setError(errorMessage(err)));
      },
    }),
    [client, store, edit, regenerate, switchTo, onChanged, scroll],
  );

  const clear = async () => {
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
    <main className={`main${drop.dragging ? " is-dropping" : ""}`} aria-busy={state.seq === null} {...drop.handlers}>
      <ConversationHeader
        title={title}
        status={status}
        empty={state.messageIds.length === 0}
        onClear={() => void clear()}
        role={role}
        present={others(conv.present, me)}
        onMembers={() => setMembersOpen(true)}
        onShare={() => setShareOpen(true)}
      >
        {header}
      </ConversationHeader>
      <div className="messages" ref={scroll.ref} onScroll={scroll.onScroll}>
        <div className="messages-inner">
          {state.seq === null ? <p className="muted center">Loading…</p> : null}
          {state.seq !== null && state.older !== null ? (
            <OlderMessages scroller={scroll.ref} older={state.older} load={loadOlder} error={conv.error} />
          ) : null}
          {state.seq !== null && state.messageIds.length === 0 ? (
            <p className="muted center">No messages yet. Say something below.</p>
          ) : null}
          <PersonWaits.Provider value={personWaits}>
            {renderMessages(state, reasons, actions, votes, vote, highlighted, models, pauses, writing, people)}
          </PersonWaits.Provider>
          <TypingIndicator ids={others(conv.typing, me)} />
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
      <Composer
        onSend={send}
        onStop={stop}
        running={running}
        autoFocus
        uploads={uploads}
        onTyping={(hasText) => (hasText ? typed() : stoppedTyping())}
        disabled={role === "viewer"}
        placeholder={role === "viewer" ? "You view this conversation: only its owner and participants write" : undefined}
      />
      {membersOpen ? (
        <MembersDialog
          client={client}
          conversationId={conversationId}
          role={role}
          me={me}
          members={members}
          onClose={() => setMembersOpen(false)}
          onLeft={() => {
            onChanged();
            navigate("/", { replace: true });
          }}
        />
      ) : null}
      {shareOpen ? (
        <ShareDialog
          client={client}
          conversationId={conversationId}
          role={role}
          me={me}
          changes={shareChanges}
          onClose={() => setShareOpen(false)}
        />
      ) : null}
      {traceFor ? <TraceDialog client={client} messageId={traceFor} onClose={() => setTraceFor(null)} /> : null}
    </main>
  );
}

/** People: the caller (null when the token does not say) and the caller's role in the conversation. */
interface People {
  me: string | null;
  role: string;
}

/** renderMessages renders groupMessages' items: messages, and comparisons side by side. */
function renderMessages(
  state: ConversationState,
  reasons: Readonly<Record<string, string>>,
  actions: MessageActions,
  votes: Record<string, Preference>,
  onVote: (comparisonId: string, p: Preference) => void,
  highlighted: string | undefined,
  models: Record<string, string>,
  pauses: Record<string, ReactNode>,
  writing: boolean,
  people: People,
): ReactNode[] {
  return groupMessages(state).map((item) =>
    item.kind === "comparison" ? (
      <ComparisonView
        key={`cmp-${item.comparisonId}`}
        comparisonId={item.comparisonId}
        sides={item.sides.map((x) => ({
          message: x,
          blocks: messageBlocks(state, x.id),
          error: reasons[x.id],
          model: models[x.id],
        }))}
        vote={votes[item.comparisonId]}
        onVote={onVote}
        actions={actions}
        highlightedId={highlighted}
        writing={writing}
      />
    ) : (
      <MessageView
        key={item.message.id}
        message={item.message}
        blocks={messageBlocks(state, item.message.id)}
        error={reasons[item.message.id]}
        actions={actions}
        highlighted={highlighted === item.message.id}
        pauses={pauses[item.message.id]}
        writing={writing}
        sender={item.message.role === "user" ? senderName(item.message, people.me, people.role) : undefined}
        takeBack={mayTakeBack(item.message, people.me, people.role)}
      />
    ),
  );
}

/**
 * pausesByMessage renders, by message id, the reply's open input requests
 * and the client tools this tab ran whose calls have not ended yet.
 */
function pausesByMessage(
  state: ConversationState,
  pending: PendingInput[],
  runs: Readonly<Record<string, ClientToolRun>>,
  actions: PauseActions,
): Record<string, ReactNode> {
  const out: Record<string, ReactNode[]> = {};
  const add = (messageId: string, node: ReactNode) => (out[messageId] ??= []).push(node);
  for (const p of pending) {
    if (p.messageId) add(p.messageId, <PauseCard key={p.toolCallId} p={p} actions={actions} />);
  }
  const open = new Set(pending.map((p) => p.toolCallId));
  for (const b of Object.values(state.blocks)) {
    const tc = b.toolCall;
    const run = tc && runs[tc.id];
    if (!tc || !run || open.has(tc.id) || tc.status === "completed" || tc.status === "failed") continue;
    add(b.messageId, <ClientToolStatus key={tc.id} name={tc.name} toolCallId={tc.id} run={run} />);
  }
  return out;
}
