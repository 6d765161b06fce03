// The reply writer: what a handler writes a reply with. Every method
// queues ops for the committer of the reply's lane and returns at once;
// the committer writes the queued ops of every reply of its lane in one
// call of convo.write_batch per tick. flush() waits until what was
// queued is written.

import { randomUUID } from "node:crypto";
import { WorkerError, invalidArgument } from "./errors.js";
import * as jsonlimit from "./jsonlimit.js";
import { clean, type InputKind, type Op } from "./ops.js";

/** The part of a committer a reply talks to. */
export interface Queue {
  /** Ops were queued; urgent ones skip the batch interval. */
  queued(urgent: boolean): void;
}

/** A tool call that waits for a person, for Reply.waitForInput. */
export interface InputRequest {
  /**
   * The call: a StreamingToolCall whose arguments streamed and that was
   * not recorded (call() not called), or the tool's name and the model's
   * id of the call for a new one (its tool_use block holds input as JSON).
   */
  call: StreamingToolCall | { name: string; callId?: string };
  /** The call's arguments (parsed). */
  input: unknown;
  /** approval, client_tool or question. */
  kind: InputKind;
  /** What is asked, by kind: {} or {"message"} for an approval, {} or {"outputSchema"} for a client tool, {"question", "choices"?} for a question. */
  request?: Record<string, unknown>;
  /** When the request expires (answered as a denial); default: never. */
  expiresAt?: Date;
}

const inputKinds: readonly InputKind[] = ["approval", "client_tool", "question"];

/** The kinds of block the convenience methods open: text(), reasoning(), structured(). */
export type StreamedKind = "text" | "reasoning" | "structured";

interface Waiter {
  want: number;
  resolve: () => void;
  reject: (err: WorkerError) => void;
}

/**
 * A block being streamed: append() its text, end() it. Made by
 * Reply.startBlock; text(), reasoning() and structured() open and end
 * theirs by themselves.
 */
export class Block {
  private ended = false;
  /** Text held back: a lone high surrogate waiting for its low half. */
  private carry = "";
  /** The structured block's text, to check it is JSON when it ends. */
  private json = "";

  constructor(
    private readonly reply: Reply,
    /** The block's id (convo.blocks.id). */
    readonly id: string,
    /** Its block_type: text, reasoning, structured, tool_use, tool_result, or any lower_snake name. */
    readonly type: string,
  ) {}

  get isEnded(): boolean {
    return this.ended;
  }

  /** Streams text into the block. */
  append(text: string): void {
    this.reply.check();
    if (this.ended) throw new WorkerError("invalid_argument", `append: the ${this.type} block ${this.id} has ended`);
    if (typeof text !== "string") throw invalidArgument(`append: text must be a string, got ${typeof text}`);
    let t = this.carry + text;
    this.carry = "";
    // A surrogate pair split between two deltas is joined before it is
    // written: a lone half cannot be stored.
    const last = t.charCodeAt(t.length - 1);
    if (last >= 0xd800 && last <= 0xdbff) {
      this.carry = t.slice(-1);
      t = t.slice(0, -1);
    }
    if (this.type === "structured") this.json += t;
    this.reply.appendText(this.id, t);
  }

  /** Ends the block, merging metadata into its metadata. A structured block must hold JSON. */
  end(metadata?: Record<string, unknown>): void {
    this.reply.check();
    if (this.ended) return;
    checkMetadata("end", metadata);
    if (this.carry !== "") {
      this.reply.appendText(this.id, "\uFFFD");
      this.carry = "";
    }
    if (this.type === "structured") {
      try {
        JSON.parse(this.json);
      } catch (err) {
        throw new WorkerError("invalid_argument", `the structured output is not valid JSON: ${(err as Error).message}`);
      }
    }
    this.ended = true;
    this.reply.push({ op: "end_block", block: this.id, ...(metadata && Object.keys(metadata).length > 0 ? { metadata } : {}) });
  }
}

/**
 * A tool call whose arguments are still streaming: its tool_use block is
 * open, its arguments go in as deltas (inputDelta), and call() records the
 * call with its parsed input and ends the block.
 */
export class StreamingToolCall {
  private called: ToolCall | undefined;
  private text = "";

  constructor(
    private readonly reply: Reply,
    /** The tool_use block. */
    readonly block: Block,
    readonly name: string,
    /** The model's own id of the call (the AI SDK's toolCallId), kept in the block's metadata as callId. */
    readonly callId: string,
  ) {}

  /** Streams a piece of the argument JSON into the tool_use block. */
  inputDelta(text: string): void {
    if (this.called) throw invalidArgument(`inputDelta: tool call ${this.callId} was already recorded`);
    this.block.append(text);
    this.text += text;
  }

  /** The argument text streamed so far (inputDelta), as the model sent it. */
  get inputText(): string {
    return this.text;
  }

  /** Records the call with its input (the parsed arguments), ends the block, and returns the call. */
  call(input: unknown): ToolCall {
    if (this.called) return this.called;
    return this.record(input);
  }

  /** Whether call() recorded it. */
  get isRecorded(): boolean {
    return this.called !== undefined;
  }

  /**
   * @internal Records the call, asks for input on it, and ends its block:
   * the ops of one paused call (Reply.waitForInput queues them with
   * wait_prompt).
   */
  recordWaiting(input: unknown, kind: InputKind, request: Record<string, unknown>, expiresAt?: Date): ToolCall {
    return this.record(input, { kind, request, expiresAt });
  }

  private record(input: unknown, wait?: { kind: InputKind; request: Record<string, unknown>; expiresAt?: Date }): ToolCall {
    this.reply.check();
    limitedJsonOf("toolCall: input", input ?? {});
    const id = randomUUID();
    this.reply.push({ op: "start_tool_call", block: this.block.id, toolCall: id, name: this.name, input: input ?? {} });
    if (wait) {
      this.reply.push({
        op: "request_input",
        toolCall: id,
        kind: wait.kind,
        ...(Object.keys(wait.request).length > 0 ? { request: wait.request } : {}),
        ...(wait.expiresAt ? { expiresAt: wait.expiresAt.toISOString() } : {}),
      });
    }
    this.block.end({ name: this.name, callId: this.callId });
    this.called = new ToolCall(this.reply, id, this.name, this.callId);
    return this.called;
  }
}

/**
 * A recorded tool call: stream its output with progress(), then
 * complete() or fail() it. Either writes the call's tool_result block
 * (metadata toolCallId, callId, tool, and isError when it failed), as the
 * Go runtime does.
 */
export class ToolCall {
  private ended = false;

  constructor(
    private readonly reply: Reply,
    /** The call's id (convo.tool_calls.id). */
    readonly id: string,
    readonly name: string,
    readonly callId: string,
    /** More metadata of its tool_result block (inputKind, for a call that waited for input). */
    private readonly resultMeta: Record<string, unknown> = {},
  ) {}

  /** Streams a piece of the tool's output. */
  progress(text: string): void {
    this.reply.check();
    if (this.ended) throw invalidArgument(`progress: tool call ${this.id} has ended`);
    if (typeof text !== "string") throw invalidArgument(`progress: text must be a string, got ${typeof text}`);
    this.reply.appendText(this.id, text, true);
  }

  /** Completes the call; output (text, or JSON for anything else) is appended to what progress wrote. */
  complete(output?: unknown): void {
    this.reply.check();
    if (this.ended) throw invalidArgument(`complete: tool call ${this.id} has ended`);
    const text = output === undefined ? undefined : typeof output === "string" ? output : jsonOf("complete: output", output);
    this.ended = true;
    this.reply.push({ op: "complete_tool_call", toolCall: this.id, ...(text ? { output: text } : {}) });
    this.result(text ?? "", false);
  }

  /** Fails the call with error (not empty). */
  fail(error: string): void {
    this.reply.check();
    if (this.ended) throw invalidArgument(`fail: tool call ${this.id} has ended`);
    if (typeof error !== "string" || error.trim() === "") throw invalidArgument("fail: error must be a non-empty string");
    this.ended = true;
    this.reply.push({ op: "fail_tool_call", toolCall: this.id, error });
    this.result(`error: ${error}`, true);
  }

  private result(text: string, isError: boolean): void {
    const meta: Record<string, unknown> = { toolCallId: this.id, callId: this.callId, tool: this.name, ...this.resultMeta };
    if (isError) meta.isError = true;
    const b = this.reply.startBlock("tool_result", meta);
    b.append(text);
    b.end();
  }
}

function checkRequest(what: string, r: InputRequest): void {
  if (typeof r !== "object" || r === null) throw invalidArgument(`${what} must be an object`);
  const c = r.call as unknown;
  if (c instanceof StreamingToolCall) {
    if (c.isRecorded) throw invalidArgument(`${what}.call: tool call ${c.callId} was recorded already; pass it unrecorded`);
  } else if (typeof c !== "object" || c === null || typeof (c as { name?: unknown }).name !== "string" || (c as { name: string }).name.trim() === "") {
    throw invalidArgument(`${what}.call must be a StreamingToolCall or {name, callId?}`);
  }
  if (!inputKinds.includes(r.kind)) throw invalidArgument(`${what}.kind must be one of ${inputKinds.join(", ")}, got ${JSON.stringify(r.kind)}`);
  if (r.request !== undefined && (typeof r.request !== "object" || r.request === null || Array.isArray(r.request))) {
    throw invalidArgument(`${what}.request must be a plain object`);
  }
  if (r.request !== undefined) limitedJsonOf(`${what}.request`, r.request);
  limitedJsonOf(`${what}.input`, r.input ?? {});
  if (r.expiresAt !== undefined && (!(r.expiresAt instanceof Date) || Number.isNaN(r.expiresAt.getTime()))) {
    throw invalidArgument(`${what}.expiresAt must be a valid Date`);
  }
}

function checkMetadata(what: string, metadata: unknown): void {
  if (metadata !== undefined && (typeof metadata !== "object" || metadata === null || Array.isArray(metadata))) {
    throw invalidArgument(`${what}: metadata must be a plain object`);
  }
  if (metadata !== undefined) limitedJsonOf(`${what}: metadata`, metadata);
}

/**
 * jsonOf, for a value that must also follow convo's rule for accepted
 * JSON (jsonlimit) as it will be written (strings cleaned as encodeOps
 * cleans them): a tool call's input, a request, metadata. JSON.stringify
 * has already made an out-of-range number null, so what the rule can
 * refuse here is nesting past 64 levels (and a key holding NUL). The
 * error is invalid_argument naming what and the value's JSONPath.
 */
function limitedJsonOf(what: string, value: unknown): string {
  const text = jsonOf(what, value);
  const written = JSON.stringify(value, (_key, v: unknown) => (typeof v === "string" ? clean(v) : v));
  const problem = jsonlimit.check(written);
  if (problem !== undefined) throw invalidArgument(`${what}: ${problem}`);
  return text;
}

/**
 * value as JSON text, or an invalid_argument error naming what. Checked at
 * the call: a value JSON cannot hold (a BigInt, a cycle) found only when
 * the batch is encoded would fail every reply of the batch.
 */
function jsonOf(what: string, value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (err) {
    throw invalidArgument(`${what} must be JSON: ${(err as Error).message}`);
  }
}

const blockTypePattern = /^[a-z][a-z0-9_]{0,63}$/;

/**
 * Writes one prompt's reply. Streamed text is coalesced: text for the
 * block (or tool call) of the last queued op joins that op, so a batch
 * carries one delta per block however many chunks came since the last
 * one, and the written text is exactly the concatenation of the chunks.
 *
 * Once the reply must stop (its job's signal fired: a cancel, a lost
 * lease, a shutdown; or a write was refused), what is queued is dropped
 * and every method throws the reason, a WorkerError.
 */
export class Reply {
  private queue: Op[] = [];
  private err: WorkerError | undefined;
  private enqueued = 0;
  private done = 0;
  private waiters: Waiter[] = [];
  private appends = new Map<string, number>();
  private wrote = false;
  private bytes = 0;
  private started = false;
  /** Set once the reply is being settled (completed or failed): handlers' writes throw this. */
  private closed: WorkerError | undefined;
  /** wait_prompt was written: the prompt waits for input, held by no worker. */
  private parked = false;
  /** fail_prompt was queued: the reply's last op. */
  private failing = false;
  /** When the oldest queued op was queued (ms), for the batch's order. */
  private since = 0;
  /** The open block of text(), reasoning() or structured(). */
  private current: Block | undefined;
  /** Appends and tool progress written. */
  deltas = 0;

  /** @internal */
  constructor(
    /** The prompt this reply answers. */
    readonly promptId: string,
    private readonly committer: Queue,
    private readonly opts: { coalesce: boolean; batchBytes: number },
    /** Called once when a write fails: the job stops. */
    private readonly onFailed: (err: WorkerError) => void,
  ) {}

  // ---- what handlers call

  /** Streams answer text: into the open text block, or a new one (ending the block of another kind). */
  text(delta: string): void {
    this.streamed("text", delta);
  }

  /** Streams reasoning, as text() does answer text. */
  reasoning(delta: string): void {
    this.streamed("reasoning", delta);
  }

  /** Streams a piece of structured output (the pieces joined must be JSON, checked when the block ends). */
  structured(delta: string): void {
    this.streamed("structured", delta);
  }

  /** Ends the open block of text(), reasoning() or structured(), if any, merging metadata into it; the next call of them opens a new block. */
  endBlock(metadata?: Record<string, unknown>): void {
    const b = this.current;
    this.current = undefined;
    b?.end(metadata);
  }

  /** Opens a block of any type (lower_snake) and returns it, ending the open block of text(), reasoning() or structured(). */
  startBlock(type: string, metadata?: Record<string, unknown>): Block {
    this.check();
    if (typeof type !== "string" || !blockTypePattern.test(type)) {
      throw invalidArgument(`startBlock: type must be lower_snake (${blockTypePattern}), got ${JSON.stringify(type)}`);
    }
    checkMetadata("startBlock", metadata);
    this.endBlock();
    const id = randomUUID();
    this.push({ op: "start_block", block: id, type, ...(metadata && Object.keys(metadata).length > 0 ? { metadata } : {}) });
    return new Block(this, id, type);
  }

  /** Records a tool call with its whole input: its tool_use block (the input as JSON), then the call. */
  toolCall(name: string, input: unknown, callId?: string): ToolCall {
    const json = limitedJsonOf("toolCall: input", input ?? {});
    const s = this.startToolCall(name, callId);
    s.inputDelta(json);
    return s.call(input ?? {});
  }

  /** Opens a tool call whose arguments stream (StreamingToolCall.inputDelta), recorded by its call(input). */
  startToolCall(name: string, callId?: string): StreamingToolCall {
    if (typeof name !== "string" || name.trim() === "") throw invalidArgument("toolCall: name must be a non-empty string");
    const id = callId ?? `call_${randomUUID()}`;
    const block = this.startBlock("tool_use", { name, callId: id });
    return new StreamingToolCall(this, block, name, id);
  }

  /**
   * Parks the prompt until a person answers: records each call, asks for
   * its input (request_input) and ends its tool_use block, then
   * wait_prompt, all in one batch, so that no answer can come before the
   * prompt is parked. Resolves once written; the handler then returns,
   * and the worker frees the slot without completing the prompt. Whoever
   * claims it once every request is answered (or expired) resumes it:
   * job.resumed, job.inputs. The reply takes no writes after this.
   */
  async waitForInput(requests: InputRequest[]): Promise<void> {
    this.check();
    if (!Array.isArray(requests) || requests.length === 0) throw invalidArgument("waitForInput: requests must be a non-empty array");
    requests.forEach((r, i) => checkRequest(`waitForInput: requests[${i}]`, r));
    // Every paused call's ops and wait_prompt are queued in one go, so
    // the committer takes them in one batch.
    this.endBlock();
    const streams = requests.map((r) => {
      if (r.call instanceof StreamingToolCall) return r.call;
      const s = this.startToolCall(r.call.name, r.call.callId);
      s.inputDelta(JSON.stringify(r.input ?? {}));
      return s;
    });
    requests.forEach((r, i) => streams[i].recordWaiting(r.input ?? {}, r.kind, r.request ?? {}, r.expiresAt));
    this.push({ op: "wait_prompt" }, true);
    this.closed = new WorkerError("settled", "the reply waits for input: it takes no more writes");
    await this.flush();
  }

  /** Whether the prompt was parked (waitForInput): it waits for input, and this worker let it go. */
  get isWaiting(): boolean {
    return this.parked;
  }

  /** Waits until everything queued so far is written; throws why the reply stopped, if it did. */
  flush(): Promise<void> {
    return this.waitFor(this.enqueued, true);
  }

  // ---- the runtime's side

  /** Throws why the reply stopped, if it did. */
  check(): void {
    if (this.err) throw this.err;
    if (this.closed) throw this.closed;
  }

  /** @internal Whether start_prompt was written. */
  get isStarted(): boolean {
    return this.started;
  }

  /** @internal Queues start_prompt, urgently. */
  start(): void {
    this.push({ op: "start_prompt" }, true);
  }

  /** @internal Ends the open block and queues complete_prompt; resolves once written. */
  complete(): Promise<void> {
    this.endBlock();
    this.push({ op: "complete_prompt" }, true);
    this.closed = new WorkerError("settled", "the reply was completed: it takes no more writes");
    return this.flush();
  }

  /**
   * @internal Queues fail_prompt (also after the reply stopped for a refused
   * write, whose later ops write_batch left out, and after a complete_prompt
   * whose batch failed) and resolves once written.
   */
  failWith(error: string): Promise<void> {
    if (this.failing) return Promise.reject(this.closed);
    this.failing = true;
    // A handler still running after its signal fired keeps getting the
    // reason from every write.
    this.closed = this.err ?? this.closed ?? new WorkerError("settled", "the reply was failed: it takes no more writes");
    this.err = undefined;
    this.enqueue({ op: "fail_prompt", error: error.trim() === "" ? "the worker failed without saying why" : error }, true);
    return this.flush();
  }

  /** @internal Stops the reply with err: drops what is queued; every method throws err from now on. */
  stop(err: WorkerError): void {
    if (!this.err) this.err = err;
    this.done += this.queue.length;
    this.queue = [];
    this.bytes = 0;
    this.current = undefined;
    this.settleWaiters();
  }

  /** @internal Whether ops wait to be taken. */
  get hasQueued(): boolean {
    return this.queue.length > 0;
  }

  /** @internal Whether the reply is being settled (completed, failed or parked) by its handler's end. */
  get isSettling(): boolean {
    return this.closed !== undefined;
  }

  /** @internal When the oldest queued op was queued; a reply with none sorts last. */
  waitingSince(): number {
    return this.queue.length > 0 ? this.since : Number.MAX_SAFE_INTEGER;
  }

  /**
   * @internal Hands the committer the queued ops, appends numbered (the
   * block's delta_seq). A stopped or parked reply gives nothing. (No
   * heartbeat rides in a batch: the worker's process lease keeps the
   * prompt alive, on its own timer.)
   */
  take(): Op[] {
    if (this.err || this.parked) return [];
    const ops = this.queue;
    this.queue = [];
    this.bytes = 0;
    for (const o of ops) {
      if (o.op === "append") {
        const seq = (this.appends.get(o.block) ?? 0) + 1;
        this.appends.set(o.block, seq);
        o.seq = seq;
      }
    }
    return ops;
  }

  /** @internal What became of ops taken: the first `applied` were written; the rest were not, for err. */
  settled(ops: Op[], applied: number, err?: WorkerError): void {
    this.done += ops.length;
    // fail_prompt left out with an op before it that write_batch refused
    // (the handler's last writes): it may be queued again, on its own.
    if (ops.slice(applied).some((o) => o.op === "fail_prompt")) this.failing = false;
    for (const o of ops.slice(0, applied)) {
      if (o.op === "start_prompt") this.started = true;
      else if (o.op === "wait_prompt") this.parked = true;
      else if (o.op === "append" || o.op === "tool_progress") this.deltas++;
    }
    if (err) {
      const first = !this.err;
      this.stop(err);
      if (first) this.onFailed(err);
    } else {
      this.settleWaiters();
    }
  }

  /** @internal Queues o. */
  push(o: Op, urgent = false): void {
    this.check();
    this.enqueue(o, urgent);
  }

  private enqueue(o: Op, urgent: boolean): void {
    if (this.queue.length === 0) this.since = Date.now();
    this.queue.push(o);
    this.enqueued++;
    this.committer.queued(urgent);
  }

  /** @internal Streams text to a block, or to a tool call's output. */
  appendText(target: string, text: string, toolCall = false): void {
    this.check();
    if (text === "") return;
    // The first text of the reply goes out at once: a reader waits for it.
    let urgent = !this.wrote;
    this.wrote = true;
    this.bytes += Buffer.byteLength(text);
    if (this.bytes >= this.opts.batchBytes) urgent = true;
    const last = this.queue[this.queue.length - 1];
    if (this.opts.coalesce && last !== undefined) {
      if (!toolCall && last.op === "append" && last.block === target) {
        last.text += text;
        if (urgent) this.committer.queued(true);
        return;
      }
      if (toolCall && last.op === "tool_progress" && last.toolCall === target) {
        last.text += text;
        if (urgent) this.committer.queued(true);
        return;
      }
    }
    this.push(toolCall ? { op: "tool_progress", toolCall: target, text } : { op: "append", block: target, text }, urgent);
  }

  private streamed(kind: StreamedKind, delta: string): void {
    this.check();
    if (typeof delta !== "string") throw invalidArgument(`${kind}: delta must be a string, got ${typeof delta}`);
    if (delta === "") return;
    if (!this.current || this.current.type !== kind || this.current.isEnded) {
      this.endBlock();
      this.current = this.startBlock(kind);
    }
    this.current.append(delta);
  }

  private waitFor(want: number, urgent: boolean): Promise<void> {
    if (this.done >= want) return this.err ? Promise.reject(this.err) : Promise.resolve();
    if (urgent) this.committer.queued(true);
    return new Promise<void>((resolve, reject) => this.waiters.push({ want, resolve, reject }));
  }

  private settleWaiters(): void {
    const still: Waiter[] = [];
    for (const w of this.waiters) {
      if (this.done < w.want) still.push(w);
      else if (this.err) w.reject(this.err);
      else w.resolve();
    }
    this.waiters = still;
  }
}
