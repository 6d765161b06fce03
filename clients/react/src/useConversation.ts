// One open conversation: its store, its single stream, and its connection
// status, with the calls that act on it.

import {
  activePromptIds,
  answerInput,
  cancelReply,
  editMessage,
  errorMessage,
  follow,
  messageFiles,
  followShared,
  regenerateReply,
  sendMessage,
  siblingsOf,
  typingReporter,
  switchBranch,
  type ConnectionStatus,
  type ConversationState,
  type ConvoClient,
  type Event,
  type InputAnswerInit,
  type InputRequestState,
  type JsonValue,
  type SendMessageResponse,
  type SendOptions,
  type Siblings,
} from "@convo/client";
import { useCallback, useEffect, useMemo, useState, useSyncExternalStore } from "react";
import { ClientToolRunner, type ClientTool, type ClientToolRun } from "./clientTools.js";
import { useClient } from "./provider.js";
import { ConversationStore } from "./store.js";

export interface UseConversation {
  /**
   * The folded state, published at most once per animation frame. A
   * failed reply's message has `error`, why it failed, however the state
   * learnt of it (a snapshot after a reload included).
   */
  state: ConversationState;
  status: ConnectionStatus;
  /** The last failed call's message (send, cancel or loadOlder), or null. */
  error: string | null;
  /** True once the conversation turned out not to exist (or not to be the user's). */
  notFound: boolean;
  /** send appends the user's text to this conversation and queues the reply. */
  send: (text: string, o?: Omit<SendOptions, "conversationId">) => Promise<SendMessageResponse | null>;
  /** cancel stops every reply of this conversation still queued or running. */
  cancel: () => Promise<void>;
  /**
   * hasOlder is true while messages before the first one in state are not
   * loaded: the server's snapshot holds only the latest messages
   * (CONVO_SNAPSHOT_BYTES) and loadOlder pages the others in.
   */
  hasOlder: boolean;
  /**
   * loadOlder loads the page of messages before the first one in state.
   * Called while a page loads, it waits for that one instead of asking
   * twice. A failure sets error (it never rejects).
   */
  loadOlder: () => Promise<void>;
  /** The store behind state (for optimistic changes: store.dispatch). */
  store: ConversationStore;
  /**
   * The open input requests (pauses: approvals, client tools, questions),
   * in the order they were made, each with its tool call and, for a client
   * tool, its run as this tab sees it.
   */
  pending: PendingInput[];
  /** The runs of client tools this tab knows of, by tool call id (kept once answered). */
  clientToolRuns: Readonly<Record<string, ClientToolRun>>;
  /** approve lets the tool call run (AnswerInput); a failure sets error. */
  approve: (toolCallId: string, reason?: string) => Promise<boolean>;
  /** deny refuses the tool call, with a reason the model reads. */
  deny: (toolCallId: string, reason?: string) => Promise<boolean>;
  /** answer answers a question (one of its choices when it has some). */
  answer: (toolCallId: string, text: string) => Promise<boolean>;
  /**
   * writing is true while a reply of this conversation is queued or being
   * written: edit, regenerate and switchTo are refused then (cancel first),
   * so an app disables them and says why.
   */
  writing: boolean;
  /**
   * siblings is where a message of state stands among the versions of its
   * turn (docs/branches.md): show "‹ index+1 / count ›" when count > 1.
   */
  siblings: (messageId: string) => Siblings | undefined;
  /**
   * edit makes a new version of a user message with text, and its reply
   * (the old version kept). The new version holds fileIds (uploads);
   * without them, the files the message holds now (messageFiles). It
   * resolves to false, with error set, when refused (a reply still being
   * written: the error says so).
   */
  edit: (messageId: string, text: string, fileIds?: string[]) => Promise<boolean>;
  /** regenerate writes a reply again as a new version (default: the latest reply); false and error when refused. */
  regenerate: (messageId?: string) => Promise<boolean>;
  /**
   * switchTo shows another version: the branch below messageId or, with
   * siblingIndex, below that version of messageId's turn ("‹": the
   * message's siblingIndex - 1, "›": + 1); false and error when refused.
   */
  switchTo: (messageId: string, siblingIndex?: number) => Promise<boolean>;
  /**
   * Who views the conversation now and who types in it (user ids, sorted),
   * with the option `presence: true`; empty without it.
   */
  present: readonly string[];
  typing: readonly string[];
  /**
   * typed reports the user typing (call it on every keystroke of the
   * composer: reports go out at most every 2 s); stoppedTyping reports the
   * end once (after a send, a cleared draft, or on leaving).
   */
  typed: () => void;
  stoppedTyping: () => void;
}

/** An open input request with its tool call. */
export interface PendingInput extends InputRequestState {
  /** The tool call's tool name and input. */
  toolName: string;
  input?: JsonValue;
  /** The block of the tool call, and its message. */
  blockId: string;
  messageId: string;
  /** For a client tool this tab registered: its run here or elsewhere. */
  run?: ClientToolRun;
}

export interface UseConversationOptions {
  /** Called once per event received, outside React's render. */
  onEvent?: (ev: Event) => void;
  /** A client other than the ConvoProvider's. */
  client?: ConvoClient;
  /**
   * share (default true): the tabs of this origin that follow the same
   * conversation share one stream (followShared), so that many tabs fit in
   * a browser's six connections per host over HTTP/1.1.
   */
  share?: boolean;
  /**
   * clientTools are the tools this app runs for the model, by name (e.g.
   * {browser_info: async (input) => output}). Each open request of one of
   * them runs exactly once across tabs: the tab claims it (ClaimInput,
   * renewed at half its 30 s lease), runs it and answers with its output or
   * error; another tab shows it running elsewhere, and takes it over when
   * the claim lapses (its tab closed).
   */
  clientTools?: Readonly<Record<string, ClientTool>>;
  /**
   * presence (default false): the stream asks for presence, so that this
   * user counts as viewing while the conversation is open and the hook's
   * present and typing lists are kept.
   */
  presence?: boolean;
}

/**
 * useConversation follows conversation id: one StreamConversation,
 * reconnected and resumed by itself (see followConversation) and shared by
 * the tabs of the origin that follow the same conversation, folded into a
 * state that re-renders the component at most once per animation frame,
 * however fast deltas arrive.
 */
export function useConversation(id: string, o: UseConversationOptions = {}): UseConversation {
  const client = useClient(o.client, "useConversation");
  const [store] = useState(() => new ConversationStore(id));
  const [status, setStatus] = useState<ConnectionStatus>("connecting");
  const [notFound, setNotFound] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const state = useSyncExternalStore(store.subscribe, store.getSnapshot, store.getSnapshot);

  // The latest onEvent without restarting the stream when it changes.
  const [handler] = useState(() => ({ current: o.onEvent }));
  handler.current = o.onEvent;

  const share = o.share ?? true;
  const presence = o.presence ?? false;
  useEffect(() => {
    const opts = {
      client,
      conversationId: id,
      getSeq: store.seq,
      hasGap: store.hasGap,
      needsSnapshot: store.needsSnapshot,
      dispatch: store.dispatch,
      onStatus: setStatus,
      onEvent: (ev: Event) => handler.current?.(ev),
      onNotFound: () => setNotFound(true),
      presence,
    };
    return share ? followShared({ ...opts, getState: store.current }) : follow(opts);
  }, [client, id, store, handler, share, presence]);

  // Typing: one reporter per conversation; its end is reported on leaving.
  const reporter = useMemo(() => typingReporter(client, id), [client, id]);
  useEffect(() => () => reporter.stopped(), [reporter]);

  const send = useCallback(
    async (text: string, so: Omit<SendOptions, "conversationId"> = {}) => {
      try {
        const res = await sendMessage(client, text, { ...so, conversationId: id });
        setError(null);
        return res;
      } catch (err) {
        setError(errorMessage(err));
        return null;
      }
    },
    [client, id],
  );

  const cancel = useCallback(async () => {
    const ids = activePromptIds(store.current());
    const results = await Promise.allSettled(ids.map((p) => cancelReply(client, p)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    setError(failed ? errorMessage(failed.reason) : null);
  }, [client, store]);

  const loadOlder = useCallback(async () => {
    try {
      await store.loadOlder(client);
      setError(null);
    } catch (err) {
      setError(errorMessage(err));
    }
  }, [client, store]);

  // Client tools: one runner per hook, synced on every published state.
  const [tools] = useState(() => ({ current: o.clientTools ?? {} }));
  tools.current = o.clientTools ?? {};
  const [runner] = useState(
    () => new ClientToolRunner({ client, getState: store.current, getTools: () => tools.current }),
  );
  useEffect(() => {
    runner.start();
    const unsubscribe = store.subscribe(runner.sync);
    return () => {
      unsubscribe();
      runner.stop();
    };
  }, [runner, store]);
  const clientToolRuns = useSyncExternalStore(runner.subscribe, runner.getSnapshot, runner.getSnapshot);
  const pending = useMemo(() => pendingInputs(state, clientToolRuns), [state, clientToolRuns]);

  const respond = useCallback(
    async (toolCallId: string, a: InputAnswerInit) => {
      try {
        await answerInput(client, toolCallId, a);
        setError(null);
        return true;
      } catch (err) {
        setError(errorMessage(err));
        return false;
      }
    },
    [client],
  );
  const approve = useCallback(
    (id: string, reason?: string) => respond(id, { approval: { approved: true, reason } }),
    [respond],
  );
  const deny = useCallback((id: string, reason?: string) => respond(id, { approval: { approved: false, reason } }), [respond]);
  const answer = useCallback((id: string, text: string) => respond(id, { question: { answer: text } }), [respond]);

  // Branches: each call changes the active path, which the stream then
  // brings (branchSwitched) to this tab and every other.
  const attempt = useCallback(async (call: () => Promise<unknown>) => {
    try {
      await call();
      setError(null);
      return true;
    } catch (err) {
      setError(errorMessage(err));
      return false;
    }
  }, []);
  const edit = useCallback(
    (messageId: string, text: string, fileIds?: string[]) =>
      attempt(() =>
        editMessage(client, id, messageId, text, {
          fileIds: fileIds ?? messageFiles(store.current(), messageId).map((f) => f.id),
        }),
      ),
    [attempt, client, id, store],
  );
  const regenerate = useCallback(
    (messageId?: string) => attempt(() => regenerateReply(client, id, messageId)),
    [attempt, client, id],
  );
  const switchTo = useCallback(
    (messageId: string, siblingIndex?: number) => attempt(() => switchBranch(client, id, messageId, siblingIndex)),
    [attempt, client, id],
  );
  const siblings = useCallback((messageId: string) => siblingsOf(state, messageId), [state]);
  const writing = activePromptIds(state).length > 0;

  return {
    state,
    status,
    error,
    notFound,
    send,
    cancel,
    hasOlder: state.older !== null,
    loadOlder,
    store,
    pending,
    clientToolRuns,
    approve,
    deny,
    answer,
    writing,
    siblings,
    edit,
    regenerate,
    switchTo,
    present: state.present,
    typing: state.typing,
    typed: reporter.typed,
    stoppedTyping: reporter.stopped,
  };
}

/** pendingInputs joins each open request of state with its tool call and its run in this tab. */
export function pendingInputs(state: ConversationState, runs: Readonly<Record<string, ClientToolRun>> = {}): PendingInput[] {
  if (state.inputs.length === 0) return [];
  const calls = new Map<string, { blockId: string; messageId: string; name: string; input?: JsonValue }>();
  for (const b of Object.values(state.blocks)) {
    if (b.toolCall) calls.set(b.toolCall.id, { blockId: b.id, messageId: b.messageId, name: b.toolCall.name, input: b.toolCall.input });
  }
  return state.inputs.map((i) => {
    const c = calls.get(i.toolCallId);
    return {
      ...i,
      toolName: c?.name ?? "",
      input: c?.input,
      blockId: c?.blockId ?? "",
      messageId: c?.messageId ?? "",
      run: runs[i.toolCallId],
    };
  });
}
