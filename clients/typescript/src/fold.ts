// The client state model of one conversation: a pure reducer over the
// StreamConversation protocol (docs/streaming.md, docs/events.md).
//
// - A snapshot REPLACES the state and sets seq to the snapshot's seq.
// - Replayed events (replay = true) are synthesised by the server for blocks
//   still streaming at the snapshot's seq and carry that seq. They are
//   applied only in the window right after a snapshot, before the first live
//   event, and they are idempotent: a replayed delta or tool output SETS the
//   text so far instead of appending it.
// - A live event is applied exactly once, in seq order: an event whose seq is
//   not above the last applied seq changes nothing; one that arrives ahead of
//   its turn is held in `pending` until the events before it have arrived.
//
// - A block goes to its place in the message by its position, not to the
//   end: blocks of one message may stream at the same time, and a snapshot
//   holds only the completed ones, so a replayed or live blockStart may
//   belong before blocks the client already has.
//
// - Bad input never throws out of the fold. An event of a kind this client
//   does not know (a newer server) is skipped and counted in
//   unknownEvents; its seq still counts as applied. An event that
//   contradicts the state (a delta, end or tool call event for a block the
//   client never saw start) sets `desync`: the state is no longer
//   trustworthy, and a follower (followConversation) starts over from a
//   fresh snapshot.
//
// - A snapshot may hold only the latest messages (the server bounds it:
//   CONVO_SNAPSHOT_BYTES); its olderPageToken is then kept in `older`, and
//   an `older` action (loadOlder: a ListMessages page) puts the page's
//   messages before the first one the state holds and keeps the page's
//   nextPageToken (null: the state holds every message from the first). A
//   page is applied only when it answers the state's current token: one
//   that was asked for before a snapshot changed the window is dropped (it
//   would leave a hole), and a message the state already holds is skipped.
// - A new snapshot replaces the state with its own window: pages loaded
//   before are dropped (the stream was away, so changes to them may have
//   been missed) and are loaded again from the snapshot's token. A
//   `replace` (another tab's state) keeps the pages this state loaded
//   before the other state's first message when this state holds that
//   message: both folded the same actions, so they are up to date.
// - Events about a message older than the state's window (only
//   messageUpdated, e.g. feedback given in another tab; a message still
//   being written is always in the window) neither add it nor set desync:
//   the latest is held in `olderUpdates` and replaces the message's fields
//   when a page brings it, since the page may have been read before it.
//
// - Pauses (docs/events.md "Pauses"): `inputs` holds the open input
//   requests, those still waiting for an answer, in the order they were
//   made. A snapshot's pendingInputs replace them (those of status
//   "pending"; an answered one waits only for the worker); inputRequested
//   adds one, inputClaimed sets its claimedBy and claimExpiresAt, and
//   inputAnswered (answered, expired or cancelled), the end of its tool
//   call or of its prompt, or historyCleared remove it. Each of these
//   events also carries the reply's message, applied as messageUpdated.
//   The follower asks for these events (includePauseEvents) unless told
//   not to; without them `inputs` stays empty.
//
// - Branches (docs/branches.md): a conversation is a tree and the state
//   holds its active path. branchSwitched (an edit, a regeneration or a
//   switch, in this tab or another) keeps the messages up to its
//   forkMessageId, drops the rest with their blocks, and appends its
//   messages with their blocks; a fork the state does not hold (older
//   than its window) keeps none, and `older` stays for the pages before
//   the new messages (a page skips the messages held). Such a fork is
//   remembered (`olderFork`) until a page brings it: a page read before
//   the switch answers the same token with messages of the old path after
//   the fork, which the new path does not hold, and is dropped (a page
//   read after it holds, after the fork, only messages the state holds).
//   Each message keeps
//   its parentId, siblingCount and siblingIndex ("‹ n / m ›"). The
//   follower asks for these events (includeBranches).
//
// Applying a snapshot, its replay and then the live events yields the same
// messages and blocks as GetConversation at the same seq; loading every
// older page as well, at any moment, yields all of them.

import type { Event } from "./gen/convo/v1/events_pb.js";
import type { Block, InputRequest, Message } from "./gen/convo/v1/types_pb.js";
import {
  blockState,
  conversationInfo,
  messageFields,
  toolCallState,
  tsMs,
  type BlockState,
  type FileState,
  type ConversationInfo,
  inputRequestState,
  type FeedbackInfo,
  type InputRequestState,
  type MessageState,
} from "./state.js";

export interface ConversationState {
  conversationId: string;
  conversation: ConversationInfo | null;
  /** Message ids in conversation order. */
  messageIds: string[];
  messages: Readonly<Record<string, MessageState>>;
  blocks: Readonly<Record<string, BlockState>>;
  /**
   * Why a failed prompt failed, by assistant message id: each failed
   * message's `error` (from the snapshot, a page, a branchSwitched, a
   * messageUpdated or promptFailed), kept here too for readers by id.
   */
  errors: Readonly<Record<string, string>>;
  /** The last applied seq; null until the first snapshot. */
  seq: bigint | null;
  /** True from a snapshot until the first live event: replay may follow. */
  replayOpen: boolean;
  /** Live events that arrived ahead of their turn, ascending by seq. */
  pending: readonly Event[];
  /** Events of kinds this client does not know, skipped (forward compatibility). */
  unknownEvents: number;
  /** An event contradicted the state: it must be rebuilt from a fresh snapshot. */
  desync: boolean;
  /**
   * The page token of the messages before the first of messageIds
   * (ListMessages: loadOlder), or null when the state holds every message
   * from the conversation's first.
   */
  older: string | null;
  /** The latest messageUpdated of each message before the window, not loaded yet (applied when a page brings it). */
  olderUpdates: Readonly<Record<string, Omit<MessageState, "blockIds">>>;
  /**
   * The fork of a branchSwitched that was older than the window, until a
   * page brings it: a page that holds, after it, a message the state does
   * not hold was read before the switch, and is dropped.
   */
  olderFork: string | null;
  /** The open input requests (pauses), in the order they were made. */
  inputs: readonly InputRequestState[];
  /**
   * Who views the conversation now (user ids, sorted), from the stream's
   * latest presence: empty unless followed with `presence: true`.
   * Ephemeral: not part of seq; each presence replaces both lists.
   */
  present: readonly string[];
  /** Who is typing in the conversation now (user ids, sorted); see present. */
  typing: readonly string[];
}

/** The snapshot part of a StreamConversation response or a GetConversation response. */
export interface SnapshotLike {
  conversation?: Parameters<typeof conversationInfo>[0];
  messages: Message[];
  seq: bigint;
  /** Set when the snapshot left older messages out: ListMessages with it pages them in. */
  olderPageToken?: string;
  /** The open input requests at seq (a stream or GetConversation that asked includePauseEvents). */
  pendingInputs?: InputRequest[];
}

/** A page of older messages: a ListMessages response to pageToken (see loadOlder). */
export interface OlderPage {
  /** The token the page answers: the state's `older` when it was asked for. */
  pageToken: string;
  /** The page's messages, oldest first, each with every block as it stands. */
  messages: Message[];
  /** The token of the messages before these; "" when there are none. */
  nextPageToken: string;
}

export type Action =
  | { type: "snapshot"; snapshot: SnapshotLike }
  | { type: "event"; event: Event }
  /** A page of older messages, put before the first message the state holds (loadOlder). */
  | ({ type: "older" } & OlderPage)
  /** A local, optimistic change of a message's feedback (the server's messageUpdated confirms it). */
  | { type: "feedback"; messageId: string; feedback: FeedbackInfo | undefined }
  | { type: "reset"; conversationId: string }
  /** The whole state of another follower of the same conversation (another tab's: followShared). */
  | { type: "replace"; state: ConversationState }
  /** A stream's presence (includePresence): who views and who types, replacing the last. */
  | { type: "presence"; presence: PresenceLike };

/** What the fold reads of a Presence message. */
export interface PresenceLike {
  users: readonly { userId: string; viewing: boolean; typing: boolean }[];
}

export function initialState(conversationId: string): ConversationState {
  return {
    conversationId,
    conversation: null,
    messageIds: [],
    messages: {},
    blocks: {},
    errors: {},
    seq: null,
    replayOpen: false,
    pending: [],
    unknownEvents: 0,
    desync: false,
    older: null,
    olderUpdates: {},
    olderFork: null,
    inputs: [],
    present: [],
    typing: [],
  };
}

/**
 * reduce applies one action. It never throws: an action it cannot apply
 * leaves the state marked `desync` (see above).
 */
export function reduce(state: ConversationState, action: Action): ConversationState {
  try {
    return apply(state, action);
  } catch {
    return state.desync ? state : { ...state, desync: true };
  }
}

function apply(state: ConversationState, action: Action): ConversationState {
  switch (action.type) {
    case "reset":
      return initialState(action.conversationId);
    case "replace":
      return action.state.conversationId === state.conversationId ? replaceKeepingOlder(state, action.state) : state;
    case "snapshot":
      return applySnapshot(state, action.snapshot);
    case "older":
      return applyOlder(state, action);
    case "event":
      return receiveEvent(state, action.event);
    case "presence":
      return applyPresence(state, action.presence);
    case "feedback": {
      const m = state.messages[action.messageId];
      if (!m) return state;
      return { ...state, messages: { ...state.messages, [m.id]: { ...m, feedback: action.feedback } } };
    }
  }
}

/** hasGap is true while some live events wait for an earlier one that has not arrived. */
export function hasGap(state: ConversationState): boolean {
  return state.pending.length > 0;
}

function applySnapshot(state: ConversationState, snap: SnapshotLike): ConversationState {
  const messages: Record<string, MessageState> = {};
  const blocks: Record<string, BlockState> = {};
  const messageIds: string[] = [];
  for (const m of snap.messages) {
    if (messages[m.id]) continue;
    messageIds.push(m.id);
    messages[m.id] = { ...messageFields(m), blockIds: idsByPosition(m.blocks) };
    for (const b of m.blocks) blocks[b.id] = blockState(b, m.id);
  }
  // A snapshot's failed messages carry their errors; a reason this state
  // learnt live is kept for a still-failed message the snapshot brought
  // without one (a server before Message.error).
  const errors: Record<string, string> = {};
  for (const id of messageIds) {
    const m = messages[id];
    if (m.status !== "failed") continue;
    const err = m.error || state.errors[id];
    if (err) {
      errors[id] = err;
      if (!m.error) messages[id] = { ...m, error: err };
    }
  }
  return {
    conversationId: snap.conversation?.id || state.conversationId,
    conversation: snap.conversation ? conversationInfo(snap.conversation) : state.conversation,
    messageIds,
    messages,
    blocks,
    errors,
    seq: snap.seq,
    replayOpen: true,
    pending: [],
    unknownEvents: state.unknownEvents,
    desync: false,
    older: snap.olderPageToken || null,
    olderUpdates: {},
    olderFork: null,
    inputs: (snap.pendingInputs ?? []).filter((r) => r.status === "pending").map(inputRequestState),
    // Presence is not part of a snapshot: the stream's next presence replaces it.
    present: state.present,
    typing: state.typing,
  };
}

/**
 * applyOlder puts a page of older messages before the first message the
 * state holds, in order, skipping those it already holds; a message's
 * held messageUpdated (olderUpdates) replaces the page's fields. A page
 * that does not answer the state's current token changes nothing, nor
 * does one read before a branchSwitched whose fork was older than the
 * window (olderFork): the same token then named the old path's messages,
 * and the page holds, after the fork (or without it), messages the new
 * path does not.
 */
function applyOlder(state: ConversationState, page: OlderPage): ConversationState {
  if (state.seq === null || state.older === null || page.pageToken !== state.older) return state;
  let olderFork = state.olderFork;
  if (olderFork !== null) {
    const fork = page.messages.findIndex((m) => m.id === olderFork);
    if (page.messages.some((m, i) => i > fork && !state.messages[m.id])) return state;
    if (fork >= 0) olderFork = null;
  }
  const ids: string[] = [];
  const messages: Record<string, MessageState> = { ...state.messages };
  const blocks: Record<string, BlockState> = { ...state.blocks };
  const olderUpdates: Record<string, Omit<MessageState, "blockIds">> = { ...state.olderUpdates };
  const errors: Record<string, string> = { ...state.errors };
  for (const m of page.messages) {
    if (messages[m.id]) continue;
    ids.push(m.id);
    const held = { ...messageFields(m), ...olderUpdates[m.id], blockIds: idsByPosition(m.blocks) };
    messages[m.id] = held;
    if (held.status === "failed" && held.error) errors[m.id] = held.error;
    delete olderUpdates[m.id];
    for (const b of m.blocks) blocks[b.id] = blockState(b, m.id);
  }
  return {
    ...state,
    messageIds: [...ids, ...state.messageIds],
    messages,
    blocks,
    errors,
    older: page.nextPageToken || null,
    olderUpdates,
    olderFork,
  };
}

/**
 * replaceKeepingOlder takes another follower's state (another tab's), and
 * keeps the messages this state holds before that state's first message
 * (pages this tab loaded): both states folded the same actions since, so
 * those messages are as current as the rest.
 */
function replaceKeepingOlder(state: ConversationState, next: ConversationState): ConversationState {
  const first = next.messageIds[0];
  const at = first === undefined ? -1 : state.messageIds.indexOf(first);
  if (at <= 0 || next.seq === null) return next;
  const kept = state.messageIds.slice(0, at);
  const messages: Record<string, MessageState> = { ...next.messages };
  const blocks: Record<string, BlockState> = { ...next.blocks };
  const errors: Record<string, string> = { ...next.errors };
  for (const id of kept) {
    const m = state.messages[id];
    messages[id] = m;
    for (const b of m.blockIds) if (state.blocks[b]) blocks[b] = state.blocks[b];
    if (state.errors[id] !== undefined) errors[id] = state.errors[id];
  }
  const olderUpdates = { ...next.olderUpdates, ...state.olderUpdates };
  for (const id of kept) delete olderUpdates[id];
  // The older pages are this state's (its token): so is the fork they
  // wait for, unless it is held now.
  const olderFork = state.olderFork !== null && !messages[state.olderFork] ? state.olderFork : null;
  return {
    ...next,
    messageIds: [...kept, ...next.messageIds],
    messages,
    blocks,
    errors,
    older: state.older,
    olderUpdates,
    olderFork,
  };
}

/**
 * resumeSeq is the seq a dropped stream may resume after (afterSeq), or
 * null when it must start again from a snapshot. A snapshot is followed by
 * the replay of the blocks still streaming, and nothing marks the replay's
 * end: a stream cut in the middle of it, resumed after the snapshot's seq,
 * would leave those blocks missing or without their beginning. So while a
 * reply was in progress at the snapshot (an assistant message
 * "processing") and no live event has come since, it is null.
 */
export function resumeSeq(state: ConversationState): bigint | null {
  if (state.replayOpen && Object.values(state.messages).some((m) => m.status === "processing")) return null;
  return state.seq;
}

function receiveEvent(state: ConversationState, ev: Event): ConversationState {
  if (state.seq === null) return state; // nothing to apply events to yet
  if (ev.replay) {
    return state.replayOpen ? applyEvent(state, ev, true) : state;
  }
  if (ev.seq <= state.seq) return state; // already applied
  if (ev.seq > state.seq + 1n) {
    // Ahead of its turn: hold it until the events before it arrive.
    if (state.pending.some((p) => p.seq === ev.seq)) return state;
    const pending = [...state.pending, ev].sort((a, b) => (a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0));
    return { ...state, pending };
  }
  let next = { ...applyEvent(state, ev, false), seq: ev.seq, replayOpen: false };
  // Drain held events that are now in turn.
  while (next.pending.length > 0 && next.pending[0].seq <= (next.seq as bigint) + 1n) {
    const [head, ...rest] = next.pending;
    next = { ...next, pending: rest };
    if (head.seq === (next.seq as bigint) + 1n) {
      next = { ...applyEvent(next, head, false), seq: head.seq };
    }
  }
  return next;
}

function setMessage(state: ConversationState, m: MessageState): ConversationState {
  return { ...state, messages: { ...state.messages, [m.id]: m } };
}

function setBlock(state: ConversationState, b: BlockState): ConversationState {
  return { ...state, blocks: { ...state.blocks, [b.id]: b } };
}

/** ensureMessage returns the state with a message of that id, adding an empty one if unknown. */
function ensureMessage(state: ConversationState, id: string): ConversationState {
  if (state.messages[id]) return state;
  const m: MessageState = {
    id,
    role: "assistant",
    status: "processing",
    promptId: "",
    comparisonId: "",
    comparisonSlot: "",
    parentId: "",
    siblingCount: 1,
    siblingIndex: 0,
    error: "",
    blockIds: [],
  };
  return { ...setMessage(state, m), messageIds: [...state.messageIds, id] };
}

const promptToMessageStatus: Record<string, string> = {
  queued: "pending",
  running: "processing",
  completed: "completed",
  failed: "failed",
  cancelled: "cancelled",
};

function applyEvent(state: ConversationState, ev: Event, replay: boolean): ConversationState {
  const k = ev.kind;
  switch (k.case) {
    case "messageCreated": {
      const pm = k.value.message;
      if (!pm) return state;
      const existing = state.messages[pm.id];
      let next = state;
      const blockIds = pm.blocks.length > 0 ? idsByPosition(pm.blocks) : (existing?.blockIds ?? []);
      if (pm.blocks.length > 0) {
        const blocks = { ...state.blocks };
        for (const b of pm.blocks) blocks[b.id] = blockState(b, pm.id);
        next = { ...next, blocks };
      }
      next = setMessage(next, { ...messageFields(pm), blockIds });
      if (!existing) next = { ...next, messageIds: [...next.messageIds, pm.id] };
      return next;
    }
    case "messageUpdated":
      return updateMessage(state, k.value.message);
    case "inputRequested": {
      const next = updateMessage(state, k.value.message);
      const r = k.value.inputRequest;
      if (!r || r.status !== "pending" || next.inputs.some((i) => i.toolCallId === r.toolCallId)) return next;
      return { ...next, inputs: [...next.inputs, inputRequestState(r)] };
    }
    case "inputAnswered":
      return withoutInputs(updateMessage(state, k.value.message), (i) => i.toolCallId === k.value.toolCallId);
    case "inputClaimed": {
      const next = updateMessage(state, k.value.message);
      const v = k.value;
      return {
        ...next,
        inputs: next.inputs.map((i) =>
          i.toolCallId === v.toolCallId ? { ...i, claimedBy: v.claimedBy, claimExpiresAt: tsMs(v.claimExpiresAt) } : i,
        ),
      };
    }
    case "promptWaiting":
      return updateMessage(state, k.value.message);
    case "promptQueued":
    case "promptStarted":
    case "promptCompleted":
    case "promptCancelled":
    case "promptFailed": {
      const p = k.value.prompt;
      if (!p) return state;
      let next = state;
      const m = state.messages[p.messageId];
      const status = promptToMessageStatus[p.status];
      if (m && status && m.status !== status) next = setMessage(next, { ...m, status });
      if (k.case === "promptFailed") {
        const error = k.value.error || p.error;
        next = { ...next, errors: { ...next.errors, [p.messageId]: error } };
        const failed = next.messages[p.messageId];
        if (failed && error) next = setMessage(next, { ...failed, error });
      }
      if (k.case !== "promptQueued" && k.case !== "promptStarted") {
        next = withoutInputs(next, (i) => i.promptId === p.id);
      }
      return next;
    }
    case "blockStart": {
      const v = k.value;
      if (state.blocks[v.blockId]) return state; // already known: keep what it holds
      let next = ensureMessage(state, v.messageId);
      const m = next.messages[v.messageId];
      next = setMessage(next, { ...m, blockIds: insertByPosition(m.blockIds, next.blocks, v.blockId, v.position) });
      return setBlock(next, {
        id: v.blockId,
        messageId: v.messageId,
        blockType: v.blockType,
        content: "",
        metadata: v.metadata ?? {},
        status: "streaming",
        position: v.position,
      });
    }
    case "blockDelta": {
      const b = state.blocks[k.value.blockId];
      if (!b) return contradiction(state);
      // A replayed delta holds all the text so far.
      const content = replay ? k.value.content : b.content + k.value.content;
      return setBlock(state, { ...b, content });
    }
    case "blockEnd": {
      const b = state.blocks[k.value.blockId];
      if (!b) return contradiction(state);
      return setBlock(state, { ...b, status: "completed", metadata: k.value.metadata ?? b.metadata });
    }
    case "toolCallStarted": {
      const tc = k.value.toolCall;
      if (!tc) return state;
      const b = state.blocks[tc.blockId];
      if (!b) return contradiction(state);
      return setBlock(state, { ...b, toolCall: toolCallState(tc, k.value.input) });
    }
    case "toolCallProgress": {
      const b = state.blocks[k.value.blockId];
      const tc = b?.toolCall;
      if (!b || !tc || tc.id !== k.value.toolCallId) return contradiction(state);
      // A replayed progress event holds all the output so far.
      const output = replay ? k.value.output : tc.output + k.value.output;
      const status = tc.status === "started" ? "running" : tc.status;
      return setBlock(state, { ...b, toolCall: { ...tc, output, status } });
    }
    case "toolCallCompleted":
    case "toolCallFailed": {
      const tc = k.value.toolCall;
      if (!tc) return state;
      const b = state.blocks[tc.blockId];
      if (!b) return contradiction(state);
      const prev = b.toolCall;
      const next = toolCallState(tc);
      if (next.input === undefined) next.input = prev?.input;
      if (k.case === "toolCallFailed") {
        next.status = "failed";
        next.error = k.value.error || tc.error;
      }
      return withoutInputs(setBlock(state, { ...b, toolCall: next }), (i) => i.toolCallId === tc.id);
    }
    case "conversationUpdated": {
      const c = k.value.conversation;
      return c ? { ...state, conversation: keepRole(conversationInfo(c), state.conversation) } : state;
    }
    case "branchSwitched":
      return switchBranch(state, k.value.forkMessageId, k.value.messages, k.value.olderPageToken);
    case "historyCleared": {
      const c = k.value.conversation;
      return {
        ...state,
        conversation: c ? keepRole(conversationInfo(c), state.conversation) : state.conversation,
        messageIds: [],
        messages: {},
        blocks: {},
        errors: {},
        older: null,
        olderUpdates: {},
        olderFork: null,
        inputs: [],
      };
    }
    default:
      // A kind this client does not know (undefined for protobuf-es).
      return { ...state, unknownEvents: state.unknownEvents + 1 };
  }
}

/**
 * switchBranch applies a branchSwitched: the active path is kept up to
 * the fork (none when there is no fork, or the state does not hold it: a
 * fork before the window), the messages after it are dropped with their
 * blocks, failure reasons and held updates, and the new path's messages
 * are appended with their blocks. With no fork the new path starts at a
 * first message, so nothing is older; a fork before the window leaves
 * `older` as it was, and its pages bring the messages up to the fork
 * (olderFork, until one does: a page in flight may be of the old path).
 * A switch to a path larger than a snapshot carries only its latest
 * messages and the token of the rest (olderPageToken): every message is
 * replaced, as by a bounded snapshot, and `older` is that token (a page
 * in flight answers another token, and is dropped).
 */
function switchBranch(
  state: ConversationState,
  forkId: string,
  incoming: readonly Message[],
  olderPageToken: string,
): ConversationState {
  if (olderPageToken) {
    return {
      ...switchBranch(state, "", incoming, ""),
      older: olderPageToken,
    };
  }
  const at = forkId ? state.messageIds.indexOf(forkId) : -1;
  const kept = state.messageIds.slice(0, at + 1);
  const messages: Record<string, MessageState> = {};
  const blocks: Record<string, BlockState> = {};
  const errors: Record<string, string> = {};
  for (const id of kept) {
    const m = state.messages[id];
    messages[id] = m;
    for (const b of m.blockIds) if (state.blocks[b]) blocks[b] = state.blocks[b];
    if (state.errors[id] !== undefined) errors[id] = state.errors[id];
  }
  const messageIds = [...kept];
  for (const pm of incoming) {
    if (messages[pm.id]) continue;
    messageIds.push(pm.id);
    messages[pm.id] = { ...messageFields(pm), blockIds: idsByPosition(pm.blocks) };
    if (pm.status === "failed" && pm.error) errors[pm.id] = pm.error;
    for (const b of pm.blocks) blocks[b.id] = blockState(b, pm.id);
  }
  // Requests of prompts whose messages left the path (none in practice:
  // the server refuses a change of path while a reply is being written).
  const dropped = new Set(
    state.messageIds.filter((id) => !messages[id]).map((id) => state.messages[id].promptId),
  );
  return {
    ...state,
    messageIds,
    messages,
    blocks,
    errors,
    older: forkId ? state.older : null,
    olderUpdates: forkId ? state.olderUpdates : {},
    // A fork held keeps the pages' wait for an older one (it is after it).
    olderFork: !forkId ? null : at < 0 ? forkId : state.olderFork,
    inputs: state.inputs.filter((i) => !dropped.has(i.promptId)),
  };
}

/** updateMessage applies a message's new fields (messageUpdated, and the message every event of pauses carries). */
function updateMessage(state: ConversationState, pm: Message | undefined): ConversationState {
  if (!pm) return state;
  if (!state.messages[pm.id] && state.older !== null) {
    // A message before the window (feedback on an old reply): hold
    // the update for the page that brings it.
    return { ...state, olderUpdates: { ...state.olderUpdates, [pm.id]: messageFields(pm) } };
  }
  const next = ensureMessage(state, pm.id);
  const existing = next.messages[pm.id];
  const fields = messageFields(pm);
  // A failed message's update without its error (a server before
  // Message.error) keeps the one promptFailed gave.
  if (fields.status === "failed" && !fields.error) fields.error = next.errors[pm.id] ?? "";
  const updated = setMessage(next, { ...fields, blockIds: existing.blockIds });
  if (fields.status === "failed" && fields.error && updated.errors[pm.id] !== fields.error) {
    return { ...updated, errors: { ...updated.errors, [pm.id]: fields.error } };
  }
  return updated;
}

/** keepRole gives an event's conversation (which carries no role) the caller's role as the state knew it. */
function keepRole(c: ConversationInfo, prev: ConversationInfo | null | undefined): ConversationInfo {
  return c.role || !prev?.role ? c : { ...c, role: prev.role };
}

/** withoutInputs drops the open input requests that match (the state itself when none does). */
function withoutInputs(state: ConversationState, drop: (i: InputRequestState) => boolean): ConversationState {
  return state.inputs.some(drop) ? { ...state, inputs: state.inputs.filter((i) => !drop(i)) } : state;
}

/** contradiction marks the state as needing a fresh snapshot. */
function contradiction(state: ConversationState): ConversationState {
  return state.desync ? state : { ...state, desync: true };
}

/** idsByPosition lists a message's block ids in position order (ties keep their order). */
function idsByPosition(blocks: readonly Block[]): string[] {
  return [...blocks].sort((a, b) => a.position - b.position).map((b) => b.id);
}

/**
 * insertByPosition places id after every block whose position is not above
 * position, and before the rest: a block streaming at position 1 lands
 * between the completed blocks 0 and 2 whatever order they arrived in.
 */
function insertByPosition(
  ids: readonly string[],
  blocks: Readonly<Record<string, BlockState>>,
  id: string,
  position: number,
): string[] {
  let i = ids.length;
  while (i > 0 && (blocks[ids[i - 1]]?.position ?? 0) > position) i--;
  return [...ids.slice(0, i), id, ...ids.slice(i)];
}

// Selectors.

/** The files a message holds, in order (its "file" blocks' files). */
export function messageFiles(state: ConversationState, messageId: string): FileState[] {
  return messageBlocks(state, messageId).flatMap((b) => (b.blockType === "file" && b.file ? [b.file] : []));
}

/** The blocks of a message, in order. */
export function messageBlocks(state: ConversationState, messageId: string): BlockState[] {
  const m = state.messages[messageId];
  if (!m) return [];
  return m.blockIds.map((id) => state.blocks[id]).filter((b): b is BlockState => b !== undefined);
}

/** Prompt ids of assistant messages still waiting or running. */
export function activePromptIds(state: ConversationState): string[] {
  const ids = new Set<string>();
  for (const id of state.messageIds) {
    const m = state.messages[id];
    if (m.role === "assistant" && m.promptId && (m.status === "pending" || m.status === "processing")) {
      ids.add(m.promptId);
    }
  }
  if (state.conversation?.activePromptId) ids.add(state.conversation.activePromptId);
  return [...ids];
}

/**
 * activeLeaf is the message a new one would hang below as state shows it
 * (docs/branches.md): the last message of the active path, slot "a" of an
 * A/B comparison that ends it; "" before the first snapshot or for a
 * conversation without messages. It is what sendMessage's
 * parentMessageId names. A bounded snapshot or branchSwitched may hold
 * only slot "b" of that comparison (the newest message is always in,
 * however large): slot "b" then, which the server takes as well.
 */
export function activeLeaf(state: ConversationState): string {
  if (state.seq === null) return "";
  const last = state.messages[state.messageIds[state.messageIds.length - 1] ?? ""];
  if (!last) return "";
  if (last.comparisonSlot !== "b") return last.id;
  const a = state.messageIds.find((id) => {
    const m = state.messages[id];
    return m?.comparisonId === last.comparisonId && m.comparisonSlot === "a";
  });
  return a ?? last.id;
}

/** The versions of a message's turn: which one it is (from 0) and how many there are ("‹ index+1 / count ›"). */
export interface Siblings {
  index: number;
  count: number;
}

/** siblingsOf is the place of a message among the versions of its turn; undefined for a message the state does not hold. */
export function siblingsOf(state: ConversationState, messageId: string): Siblings | undefined {
  const m = state.messages[messageId];
  return m ? { index: m.siblingIndex, count: m.siblingCount } : undefined;
}

/** The open input request of a tool call, if any. */
export function inputOf(state: ConversationState, toolCallId: string): InputRequestState | undefined {
  return state.inputs.find((i) => i.toolCallId === toolCallId);
}

/**
 * applyPresence replaces the lists of who views and who types with a
 * presence's (each user once, sorted by id), keeping the old arrays when
 * they did not change so that a renderer comparing them sees no change.
 */
function applyPresence(state: ConversationState, p: PresenceLike): ConversationState {
  const ids = (pick: (u: PresenceLike["users"][number]) => boolean) =>
    [...new Set(p.users.filter(pick).map((u) => u.userId))].sort();
  const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);
  const present = ids((u) => u.viewing);
  const typing = ids((u) => u.typing);
  if (same(present, state.present) && same(typing, state.typing)) return state;
  return {
    ...state,
    present: same(present, state.present) ? state.present : present,
    typing: same(typing, state.typing) ? state.typing : typing,
  };
}
