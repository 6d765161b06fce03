// A test-only model of the server side of StreamConversation (docs/streaming.md, docs/events.md):
// it records every event a sequence of worker calls produces, the whole state
// after each seq (what GetConversation answers), and can answer a subscribe
// at any seq with its snapshot and replayed events (a whole snapshot, or, as
// a server with CONVO_SNAPSHOT_BYTES does, only the latest messages with a
// page token, and ListMessages pages of the older ones). The reducer's tests
// feed its output to the reducer and compare with GetConversation.

import { create, type JsonObject } from "@bufbuild/protobuf";
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { EventSchema, type Event } from "../gen/convo/v1/events_pb.js";
import {
  BlockSchema,
  ConversationSchema,
  MessageSchema,
  PromptSchema,
  InputRequestSchema,
  Rating,
  ToolCallSchema,
  type Block,
  type Conversation,
  type Message,
} from "../gen/convo/v1/types_pb.js";
import type { SnapshotLike } from "../fold.js";

interface FToolCall {
  id: string;
  blockId: string;
  name: string;
  status: string;
  input: unknown;
  output: string;
  error: string;
}
interface FBlock {
  id: string;
  blockType: string;
  content: string;
  metadata: JsonObject;
  status: string;
  /** position is the block's place in its message (its index: blocks are never removed). */
  position: number;
  toolCall?: FToolCall;
}
interface FMessage {
  id: string;
  role: string;
  status: string;
  promptId: string;
  blocks: FBlock[];
  comparisonId: string;
  comparisonSlot: string;
  feedback?: Rating;
  /** The tree (docs/branches.md): the parent ("" for a first message), the turn's versions and which one this is. */
  parentId: string;
  siblingCount: number;
  siblingIndex: number;
  /** Why it failed (its prompt's error), as the server's Message.error. */
  error?: string;
}
interface FInput {
  toolCallId: string;
  promptId: string;
  kind: string;
  request: JsonObject;
  status: string;
  claimedBy: string;
  claimExpiresAt?: number;
}
interface FState {
  title: string;
  activePromptId: string;
  messages: FMessage[];
  /** The open input requests: pending, or answered and not yet acted on (the tool call is open). */
  inputs?: FInput[];
}

type EventKind = Event["kind"];

export class FakeServer {
  constructor(readonly conversationId = "c1") {}

  /** log[i] has seq i + 1. */
  readonly log: Event[] = [];
  /** states[seq] is the whole state after event seq (states[0]: empty). */
  private readonly states: FState[] = [{ title: "", activePromptId: "", messages: [] }];
  private cur: FState = { title: "", activePromptId: "", messages: [] };
  private ids = 0;
  /** Every message of the tree in the order made (positions); cur.messages is the active path. */
  private tree: FMessage[] = [];
  /** The id of every message ever made, in order (never cleared): where a page token's place is. */
  private readonly made: string[] = [];

  get seq(): bigint {
    return BigInt(this.log.length);
  }

  private id(prefix: string): string {
    this.ids++;
    const scope = this.conversationId === "c1" ? "" : `${this.conversationId}-`;
    return `${scope}${prefix}${this.ids}`;
  }

  /** onEmit, when set, hears every new event (the dev mock's live stream). */
  onEmit?: (ev: Event) => void;

  private emit(kind: EventKind): void {
    const ev = create(EventSchema, { seq: this.seq + 1n, kind });
    this.log.push(ev);
    this.states.push(structuredClone(this.cur));
    this.onEmit?.(ev);
  }

  private block(id: string): FBlock {
    for (const m of this.cur.messages) {
      const b = m.blocks.find((x) => x.id === id);
      if (b) return b;
    }
    throw new Error(`no block ${id}`);
  }

  private messageOf(blockId: string): FMessage {
    const m = this.cur.messages.find((x) => x.blocks.some((b) => b.id === blockId));
    if (!m) throw new Error(`no block ${blockId}`);
    return m;
  }

  /** sendMessage appends a user message and a queued prompt; returns the assistant message and prompt ids. */
  sendMessage(text: string, comparison?: { id: string; slots: string[] }): { messageIds: string[]; promptIds: string[] } {
    const user = this.userMessage(text, this.leaf()?.id ?? "");
    this.addVersion(user);
    this.cur.messages.push(user);
    this.emit({ case: "messageCreated", value: { message: toMessage(user) } as never });
    const messageIds: string[] = [];
    const promptIds: string[] = [];
    for (const slot of comparison?.slots ?? [""]) {
      const a = this.reply(user.id, comparison?.id ?? "", slot);
      const promptId = a.promptId;
      this.addVersion(a);
      this.cur.messages.push(a);
      this.emit({ case: "messageCreated", value: { message: toMessage(a) } as never });
      this.emit({ case: "promptQueued", value: { prompt: this.prompt(a, "queued") } as never });
      messageIds.push(a.id);
      promptIds.push(promptId);
    }
    if (!this.cur.title) this.cur.title = text.split("\n")[0];
    this.cur.activePromptId = promptIds[promptIds.length - 1];
    this.emit({ case: "conversationUpdated", value: { conversation: this.conversation() } as never });
    return { messageIds, promptIds };
  }

  private userMessage(text: string, parentId: string): FMessage {
    return {
      id: this.id("m"),
      role: "user",
      status: "completed",
      promptId: "",
      comparisonId: "",
      comparisonSlot: "",
      blocks: [{ id: this.id("b"), blockType: "text", content: text, metadata: {}, status: "completed", position: 0 }],
      parentId,
      siblingCount: 1,
      siblingIndex: 0,
    };
  }

  private reply(parentId: string, comparisonId = "", comparisonSlot = ""): FMessage {
    const promptId = this.id("p");
    return {
      id: this.id("m"),
      role: "assistant",
      status: "pending",
      promptId,
      comparisonId,
      comparisonSlot,
      blocks: [],
      parentId,
      siblingCount: 1,
      siblingIndex: 0,
    };
  }

  /** leaf is the active leaf: the path's last message that is not slot "b" (the next message hangs below it). */
  private leaf(): FMessage | undefined {
    return this.cur.messages.filter((m) => m.comparisonSlot !== "b").at(-1);
  }

  /** addVersion puts m in the tree and renumbers its turn's versions (slot "b" shares slot "a"'s place). */
  private addVersion(m: FMessage): void {
    this.tree.push(m);
    this.made.push(m.id);
    const turn = this.tree.filter((x) => x.parentId === m.parentId);
    const versions = turn.filter((x) => x.comparisonSlot !== "b");
    for (const x of turn) {
      x.siblingCount = versions.length;
      const own = x.comparisonSlot === "b" ? versions.find((v) => v.comparisonId === x.comparisonId) : x;
      x.siblingIndex = own ? versions.indexOf(own) : 0;
    }
  }

  /** pathTo is the path from a first message down to leaf, with the slot "b" of each comparison on it, in order. */
  private pathTo(leaf: FMessage): FMessage[] {
    const on = new Set<FMessage>();
    for (let m: FMessage | undefined = leaf; m; m = this.tree.find((x) => x.id === m!.parentId)) {
      on.add(m);
      if (m.comparisonId) for (const x of this.tree) if (x.comparisonId === m.comparisonId) on.add(x);
    }
    return this.tree.filter((m) => on.has(m));
  }

  /**
   * switchWindow, when set, bounds a branchSwitched as the server's
   * snapshot size does: a new path with more messages after the fork
   * carries only the latest switchWindow of them (at least one) and the
   * page token of the rest.
   */
  switchWindow?: number;

  /** changePath shows the path down to leaf and emits its branchSwitched, as convo._change_path does. */
  private changePath(leaf: FMessage): void {
    const next = this.pathTo(leaf);
    const fork = next.filter((m) => this.cur.messages.includes(m)).at(-1);
    let after = fork ? next.slice(next.indexOf(fork) + 1) : next;
    let olderPageToken = "";
    if (this.switchWindow !== undefined && after.length > Math.max(1, this.switchWindow)) {
      after = after.slice(after.length - Math.max(1, this.switchWindow));
      olderPageToken = pageToken(after[0].id);
    }
    this.cur.messages = next;
    this.emit({
      case: "branchSwitched",
      value: {
        forkMessageId: fork?.id ?? "",
        leafMessageId: leaf.id,
        messages: after.map((m) => toMessage(m, true, this.conversationId)),
        olderPageToken,
      } as never,
    });
  }

  /** queued writes what follows a new version's branchSwitched: promptQueued, then conversationUpdated. */
  private queued(reply: FMessage): { messageId: string; promptId: string } {
    this.emit({ case: "promptQueued", value: { prompt: this.prompt(reply, "queued") } as never });
    this.cur.activePromptId = reply.promptId;
    this.emit({ case: "conversationUpdated", value: { conversation: this.conversation() } as never });
    return { messageId: reply.id, promptId: reply.promptId };
  }

  private find(id: string): FMessage {
    const m = this.tree.find((x) => x.id === id);
    if (!m) throw new Error(`no message ${id}`);
    return m;
  }

  /** editMessage makes a new version of a user message with a queued reply, shown (convo.edit_message). */
  editMessage(messageId: string, text: string): { userMessageId: string; messageId: string; promptId: string } {
    const old = this.find(messageId);
    const user = this.userMessage(text, old.parentId);
    this.addVersion(user);
    const reply = this.reply(user.id);
    this.addVersion(reply);
    this.changePath(reply);
    return { userMessageId: user.id, ...this.queued(reply) };
  }

  /** regenerate makes a new version of a reply (default: the path's latest), queued and shown (convo.regenerate_reply). */
  regenerate(messageId?: string): { messageId: string; promptId: string } {
    const old = messageId ? this.find(messageId) : this.cur.messages.filter((m) => m.role === "assistant").at(-1)!;
    const reply = this.reply(old.parentId);
    this.addVersion(reply);
    this.changePath(reply);
    return this.queued(reply);
  }

  /**
   * switchTo shows the newest message below messageId (itself when none;
   * below slot "a" for slot "b"), or below version siblingIndex of its
   * turn, as convo.switch_branch and switch_version do; nothing when it is
   * the branch shown. It returns the new leaf.
   */
  switchTo(messageId: string, siblingIndex?: number): string {
    let from = this.find(messageId);
    if (siblingIndex !== undefined) {
      from = this.tree.filter((x) => x.parentId === from.parentId && x.comparisonSlot !== "b")[siblingIndex];
      if (!from) throw new Error(`no version ${siblingIndex} of the turn of ${messageId}`);
    }
    const pairA = (m: FMessage) =>
      m.comparisonSlot === "b" ? this.tree.find((x) => x.comparisonId === m.comparisonId && x.comparisonSlot === "a")! : m;
    from = pairA(from);
    const below = new Set<string>([from.id]);
    let leaf = from;
    for (const m of this.tree) {
      if (below.has(m.parentId)) {
        below.add(m.id);
        leaf = m;
      }
    }
    leaf = pairA(leaf);
    if (leaf !== this.leaf()) this.changePath(leaf);
    return leaf.id;
  }

  private prompt(m: FMessage, status: string) {
    return create(PromptSchema, { id: m.promptId, conversationId: this.conversationId, messageId: m.id, status });
  }

  private byPrompt(promptId: string): FMessage {
    const m = this.cur.messages.find((x) => x.promptId === promptId);
    if (!m) throw new Error(`no prompt ${promptId}`);
    return m;
  }

  startPrompt(promptId: string): void {
    const m = this.byPrompt(promptId);
    this.emit({ case: "promptStarted", value: { prompt: this.prompt(m, "running") } as never });
    m.status = "processing";
    this.emit({ case: "messageUpdated", value: { message: toMessage(m, false) } as never });
  }

  startBlock(promptId: string, blockType: string, metadata: JsonObject = {}): string {
    const m = this.byPrompt(promptId);
    const b: FBlock = { id: this.id("b"), blockType, content: "", metadata, status: "streaming", position: m.blocks.length };
    m.blocks.push(b);
    this.emit({
      case: "blockStart",
      value: { promptId, messageId: m.id, blockId: b.id, blockType, metadata, position: b.position } as never,
    });
    return b.id;
  }

  append(blockId: string, delta: string): void {
    const b = this.block(blockId);
    const m = this.messageOf(blockId);
    b.content += delta;
    this.emit({ case: "blockDelta", value: { promptId: m.promptId, messageId: m.id, blockId, content: delta } as never });
  }

  endBlock(blockId: string, metadata?: JsonObject): void {
    const b = this.block(blockId);
    const m = this.messageOf(blockId);
    b.status = "completed";
    if (metadata) b.metadata = { ...b.metadata, ...metadata };
    this.emit({
      case: "blockEnd",
      value: { promptId: m.promptId, messageId: m.id, blockId, metadata: b.metadata } as never,
    });
  }

  startToolCall(blockId: string, name: string, input: unknown): string {
    const b = this.block(blockId);
    b.toolCall = { id: this.id("t"), blockId, name, status: "started", input, output: "", error: "" };
    this.emit({
      case: "toolCallStarted",
      value: { toolCall: toToolCall(b.toolCall, false), input: fromJson(ValueSchema, input as never) } as never,
    });
    return b.toolCall.id;
  }

  toolProgress(blockId: string, output: string): void {
    const tc = this.block(blockId).toolCall!;
    tc.output += output;
    tc.status = "running";
    this.emit({ case: "toolCallProgress", value: { toolCallId: tc.id, blockId, output } as never });
  }

  completeToolCall(blockId: string, output?: string): void {
    const tc = this.block(blockId).toolCall!;
    if (output !== undefined) tc.output = output;
    tc.status = "completed";
    this.dropInput(tc.id);
    this.emit({ case: "toolCallCompleted", value: { toolCall: toToolCall(tc, true) } as never });
  }

  failToolCall(blockId: string, error: string): void {
    const tc = this.block(blockId).toolCall!;
    tc.status = "failed";
    tc.error = error;
    this.dropInput(tc.id);
    this.emit({ case: "toolCallFailed", value: { toolCall: toToolCall(tc, true), error } as never });
  }

  /** endPrompt completes, fails or cancels a prompt: open blocks end, then the prompt and message events. */
  endPrompt(promptId: string, how: "completed" | "failed" | "cancelled", error = ""): void {
    const m = this.byPrompt(promptId);
    for (const b of m.blocks) {
      if (b.toolCall && (b.toolCall.status === "started" || b.toolCall.status === "running")) {
        this.failToolCall(b.id, "prompt ended");
      }
      if (b.status === "streaming") this.endBlock(b.id);
    }
    const kind =
      how === "completed" ? "promptCompleted" : how === "failed" ? "promptFailed" : "promptCancelled";
    this.emit({ case: kind, value: { prompt: this.prompt(m, how), error } as never });
    m.status = how;
    if (how === "failed") m.error = error;
    this.emit({ case: "messageUpdated", value: { message: toMessage(m, false) } as never });
    if (this.cur.activePromptId === promptId) {
      const other = this.cur.messages.find((x) => x.status === "pending" || x.status === "processing");
      this.cur.activePromptId = other?.promptId ?? "";
      this.emit({ case: "conversationUpdated", value: { conversation: this.conversation() } as never });
    }
  }

  private dropInput(toolCallId: string): void {
    this.cur.inputs = (this.cur.inputs ?? []).filter((i) => i.toolCallId !== toolCallId);
  }

  private input(toolCallId: string): FInput {
    const i = (this.cur.inputs ?? []).find((x) => x.toolCallId === toolCallId);
    if (!i) throw new Error(`no input request ${toolCallId}`);
    return i;
  }

  /** requestInput asks for input on the tool call of a block (request_input): inputRequested. */
  requestInput(blockId: string, kind: string, request: JsonObject = {}): string {
    const tc = this.block(blockId).toolCall!;
    const m = this.messageOf(blockId);
    const i: FInput = { toolCallId: tc.id, promptId: m.promptId, kind, request, status: "pending", claimedBy: "" };
    this.cur.inputs = [...(this.cur.inputs ?? []), i];
    this.emit({ case: "inputRequested", value: { inputRequest: toInputRequest(i, this.conversationId), message: toMessage(m, false) } as never });
    return tc.id;
  }

  /** waitPrompt parks a prompt until its requests are answered: promptWaiting. */
  waitPrompt(promptId: string): void {
    const m = this.byPrompt(promptId);
    const ids = (this.cur.inputs ?? []).filter((i) => i.promptId === promptId && i.status === "pending").map((i) => i.toolCallId);
    this.emit({ case: "promptWaiting", value: { prompt: this.prompt(m, "queued"), toolCallIds: ids, message: toMessage(m, false) } as never });
  }

  /** claimInput claims a client tool's run: inputClaimed. */
  claimInput(toolCallId: string, claimant: string, expiresAtMs: number): void {
    const i = this.input(toolCallId);
    i.claimedBy = claimant;
    i.claimExpiresAt = expiresAtMs;
    const m = this.byPrompt(i.promptId);
    this.emit({
      case: "inputClaimed",
      value: { toolCallId, promptId: i.promptId, claimedBy: claimant, claimExpiresAt: timestampFromMs(expiresAtMs), message: toMessage(m, false) } as never,
    });
  }

  /** answerInput ends a request (answered, expired or cancelled): inputAnswered; it stays open until its tool call ends. */
  answerInput(toolCallId: string, status: "answered" | "expired" | "cancelled", answer?: JsonObject): void {
    const i = this.input(toolCallId);
    i.status = status;
    const m = this.byPrompt(i.promptId);
    this.emit({ case: "inputAnswered", value: { toolCallId, promptId: i.promptId, status, answer, message: toMessage(m, false) } as never });
  }

  /** setFeedback rates an assistant message, as set_feedback does (messageUpdated). */
  setFeedback(messageId: string, rating: Rating): void {
    const m = this.cur.messages.find((x) => x.id === messageId);
    if (!m) throw new Error(`no message ${messageId}`);
    m.feedback = rating;
    this.emit({ case: "messageUpdated", value: { message: toMessage(m, false, this.conversationId) } as never });
  }

  clearHistory(): void {
    this.cur.messages = [];
    this.tree = [];
    this.cur.inputs = [];
    this.emit({ case: "historyCleared", value: { conversation: this.conversation() } as never });
  }

  private conversation(state: FState = this.cur): Conversation {
    return create(ConversationSchema, {
      id: this.conversationId,
      title: state.title,
      activePromptId: state.activePromptId,
    });
  }

  /** getConversation is GetConversation at seq (default: now): every block, streaming ones included. */
  getConversation(seq: bigint = this.seq): SnapshotLike {
    const st = this.states[Number(seq)];
    return { conversation: this.conversation(st), messages: st.messages.map((m) => toMessage(m, true, this.conversationId)), seq };
  }

  /**
   * subscribe is what StreamConversation without afterSeq sends at seq: a
   * snapshot and its replay. With o.window the snapshot holds only the
   * latest o.window messages (at least one, and every message still being
   * written with all after it), as a bounded snapshot does, and its
   * olderPageToken when it left some out.
   */
  subscribe(seq: bigint = this.seq, o: { window?: number } = {}): { snapshot: SnapshotLike; replay: Event[] } {
    const st = this.states[Number(seq)];
    let from = 0;
    if (o.window !== undefined) {
      from = Math.max(0, st.messages.length - Math.max(1, o.window));
      const writing = st.messages.findIndex((m) => m.status === "pending" || m.status === "processing");
      if (writing >= 0) from = Math.min(from, writing);
    }
    const messages = st.messages.slice(from).map((m) => {
      const pm = toMessage(m, true, this.conversationId);
      pm.blocks = pm.blocks.filter((b) => b.status === "completed");
      return pm;
    });
    const replay: Event[] = [];
    const ev = (kind: EventKind) => replay.push(create(EventSchema, { seq, replay: true, kind }));
    for (const m of st.messages) {
      for (const b of m.blocks) {
        if (b.status !== "streaming") continue;
        const ids = { promptId: m.promptId, messageId: m.id, blockId: b.id };
        ev({ case: "blockStart", value: { ...ids, blockType: b.blockType, metadata: b.metadata, position: b.position } as never });
        if (b.content) ev({ case: "blockDelta", value: { ...ids, content: b.content } as never });
        if (b.toolCall) {
          ev({
            case: "toolCallStarted",
            value: { toolCall: toToolCall(b.toolCall, false), input: fromJson(ValueSchema, b.toolCall.input as never) } as never,
          });
          if (b.toolCall.output) {
            ev({ case: "toolCallProgress", value: { toolCallId: b.toolCall.id, blockId: b.id, output: b.toolCall.output } as never });
          }
        }
      }
    }
    const olderPageToken = from > 0 ? pageToken(st.messages[from].id) : "";
    const pendingInputs = (st.inputs ?? []).map((i) => toInputRequest(i, this.conversationId));
    return { snapshot: { conversation: this.conversation(st), messages, seq, olderPageToken, pendingInputs }, replay };
  }

  /**
   * listMessages is ListMessages at seq (default: now): the latest
   * o.size (default 2) messages before the one the token names, oldest
   * first, with every block as it stands, and the token of those before
   * them ("" when none remain).
   */
  listMessages(token: string, o: { seq?: bigint; size?: number } = {}): { messages: Message[]; nextPageToken: string } {
    const st = this.states[Number(o.seq ?? this.seq)];
    // The token names a place (as the server's holds a position): the
    // path's messages before it, whether or not its message is still on
    // the path (a branchSwitched may have taken it off).
    const place = this.made.findIndex((id) => pageToken(id) === token);
    if (place < 0 || st.messages.length === 0) return { messages: [], nextPageToken: "" }; // gone (history cleared)
    const madeBefore = new Set(this.made.slice(0, place));
    let before = st.messages.findIndex((m) => !madeBefore.has(m.id));
    if (before < 0) before = st.messages.length;
    const from = Math.max(0, before - Math.max(1, o.size ?? 2));
    return {
      messages: st.messages.slice(from, before).map((m) => toMessage(m, true, this.conversationId)),
      nextPageToken: from > 0 ? pageToken(st.messages[from].id) : "",
    };
  }

  /** eventsAfter is what the stream sends after seq. */
  eventsAfter(seq: bigint): Event[] {
    return this.log.slice(Number(seq));
  }
}

/** pageToken names the messages before message id (the server's token holds a position instead). */
function pageToken(id: string): string {
  return `before:${id}`;
}

function toInputRequest(i: FInput, conversationId: string) {
  return create(InputRequestSchema, {
    toolCallId: i.toolCallId,
    promptId: i.promptId,
    conversationId,
    kind: i.kind,
    request: i.request,
    status: i.status,
    claimedBy: i.claimedBy,
    claimExpiresAt: i.claimExpiresAt === undefined ? undefined : timestampFromMs(i.claimExpiresAt),
  });
}

function toToolCall(tc: FToolCall, withOutput: boolean) {
  return create(ToolCallSchema, {
    id: tc.id,
    blockId: tc.blockId,
    name: tc.name,
    status: tc.status,
    input: fromJson(ValueSchema, tc.input as never),
    output: withOutput ? tc.output : "",
    error: tc.error,
  });
}

function toMessage(m: FMessage, withBlocks = true, conversationId = "c1"): Message {
  return create(MessageSchema, {
    id: m.id,
    conversationId,
    role: m.role,
    status: m.status,
    promptId: m.promptId,
    comparisonId: m.comparisonId,
    comparisonSlot: m.comparisonSlot,
    parentId: m.parentId,
    siblingCount: m.siblingCount,
    siblingIndex: m.siblingIndex,
    error: m.error ?? "",
    feedback: m.feedback ? { rating: m.feedback } : undefined,
    blocks: withBlocks ? m.blocks.map(toBlock) : [],
  });
}

function toBlock(b: FBlock): Block {
  return create(BlockSchema, {
    id: b.id,
    blockType: b.blockType,
    content: b.content,
    metadata: b.metadata,
    status: b.status,
    position: b.position,
    toolCall: b.toolCall
      ? create(ToolCallSchema, {
          id: b.toolCall.id,
          blockId: b.toolCall.blockId,
          name: b.toolCall.name,
          status: b.toolCall.status,
          input: fromJson(ValueSchema, b.toolCall.input as never),
          output: b.toolCall.output,
          error: b.toolCall.error,
        })
      : undefined,
  });
}
