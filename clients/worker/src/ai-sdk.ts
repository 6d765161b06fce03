// @convo/worker/ai-sdk: the adapter from the AI SDK (package "ai", v7) to
// a convo reply. writeStreamText writes a streamText result (its `stream`,
// formerly `fullStream`), writeUIMessageStream a UI message stream (what
// an AI SDK chat route returns: toUIMessageStream, createUIMessageStream):
// text and reasoning become blocks, tool calls (their input as it
// streams) tool_use blocks with their recorded calls, tool results and
// errors complete or fail the calls (each with its tool_result block), and
// an `error` part fails the prompt with the model's error text. A call
// that waits for a person pauses the prompt: a tool with `needsApproval`
// (its tool-approval-request parts become approval requests), a client
// tool (a tool without `execute`, whose call the AI SDK leaves without a
// result) and a question (a tool marked with questionMetadata, as
// askUser() is; ./ai-sdk-tools.ts). When the stream ends, each waiting
// call's request and the prompt's park (wait_prompt) are written in one
// transaction; once answered, modelMessagesOf gives streamText the
// answers (tool-approval-response parts, so the AI SDK runs the approved
// tools itself; the client tool's output or the user's answer as the
// call's tool-result). withDeclaredTools adds the client tools the
// prompt's client declared (./ai-sdk-declared.ts) to the handler's tools.
// The runtime (./worker.ts) does the rest: batching, leases, cancel.

import type { AssistantModelMessage, ModelMessage, TextStreamPart, ToolContent, ToolSet, UIMessageChunk, UserContent } from "ai";
import { checkToolMetadata, pauseOf } from "./ai-sdk-tools.js";
import { WorkerError, messageOf } from "./errors.js";
import type { HistoryMessage, PromptFile } from "./history.js";
import * as jsonlimit from "./jsonlimit.js";
import type { Job } from "./job.js";
import type { PromptInput } from "./inputs.js";
import { StreamingToolCall, type Block, type InputRequest, type Reply, type ToolCall } from "./reply.js";

export { declaredTools, withDeclaredTools, type ToolDeclaration } from "./ai-sdk-declared.js";
export {
  askUser,
  askUserName,
  clientToolMetadata,
  questionMetadata,
  type JSONObject,
} from "./ai-sdk-tools.js";

export interface WriteOptions {
  /**
   * The block type the model's text is written as: "text" (default), or
   * "structured" when the model answers in JSON (streamText with
   * `output: Output.object(…)`); a structured block must end as valid JSON.
   */
  textAs?: "text" | "structured";
}

/** A stream the adapter reads: an async iterable or a web ReadableStream. */
export type PartSource<T> = AsyncIterable<T> | ReadableStream<T>;

/** What writeStreamText reads: a streamText result, or its stream itself. */
export type StreamTextSource<TOOLS extends ToolSet = ToolSet> =
  | { readonly stream: PartSource<TextStreamPart<TOOLS>> }
  | { readonly fullStream: PartSource<TextStreamPart<TOOLS>> }
  | PartSource<TextStreamPart<TOOLS>>;

/** The error of a model stream that failed: the prompt fails with its message. */
export class ModelStreamError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ModelStreamError";
  }
}

/**
 * Writes a streamText result into the job's reply, and returns when the
 * stream ends. Pass the job's signal to streamText (`abortSignal:
 * job.signal`) so the model stops when the prompt is cancelled. Throws a
 * ModelStreamError with the model's error text when the stream has an
 * `error` part (the handler then fails the prompt, keeping the partial
 * reply), and the job's stop reason when its signal fires.
 *
 * A call that waits for a person parks the prompt when the stream ends
 * (the handler then returns; the worker frees the slot): a call the AI SDK
 * asks approval for (`needsApproval`), and a call it left without a
 * result at the end of its step, which is a client tool's (no `execute`)
 * or, for a tool with questionMetadata (askUser()), a question to the
 * user. The calls the AI SDK runs are recorded once their result (or
 * error) comes; a call is recorded when the stream says what becomes of
 * it, so that a waiting call's request is written with it.
 *
 * ```ts
 * const result = streamText({ model, messages: toModelMessages(job.history), tools, abortSignal: job.signal });
 * await writeStreamText(job, result);
 * ```
 */
export async function writeStreamText<TOOLS extends ToolSet>(job: Job, source: StreamTextSource<TOOLS>, opts: WriteOptions = {}): Promise<void> {
  const w = new ReplyWriter(job.reply, opts);
  await w.resume(job);
  await w.read(job.signal, partsOf(source), (part) => {
    switch (part.type) {
      case "text-start":
        w.open(part.id, w.textType);
        break;
      case "text-delta":
        w.delta(part.id, w.textType, part.text);
        break;
      case "text-end":
        w.close(part.id, part.providerMetadata);
        break;
      case "reasoning-start":
        w.open(part.id, "reasoning");
        break;
      case "reasoning-delta":
        w.delta(part.id, "reasoning", part.text);
        break;
      case "reasoning-end":
        w.close(part.id, part.providerMetadata);
        break;
      case "tool-input-start":
        w.toolInputStart(part.id, part.toolName);
        break;
      case "tool-input-delta":
        w.toolInputDelta(part.id, part.delta);
        break;
      case "tool-call":
        w.toolCall(part.toolCallId, part.toolName, part.input, {
          invalid: part.invalid ? messageOf(part.error ?? "invalid tool call") : undefined,
          providerExecuted: part.providerExecuted === true,
          toolMetadata: part.toolMetadata,
        });
        break;
      case "tool-approval-request":
        w.approvalRequest(part.toolCall.toolCallId, part.isAutomatic === true);
        break;
      case "tool-result":
        w.toolResult(part.toolCallId, part.output, part.preliminary === true);
        break;
      case "tool-error":
        w.toolError(part.toolCallId, messageOf(part.error));
        break;
      case "tool-output-denied":
        w.toolDenied(part.toolCallId);
        break;
      case "error":
        throw new ModelStreamError(messageOf(part.error), { cause: part.error });
      case "finish-step":
        w.endStep();
        break;
      case "abort":
        throw stopReason(job.signal) ?? new ModelStreamError(`the model's stream was aborted${part.reason ? `: ${part.reason}` : ""}`);
      default:
        // start, start-step, finish, source, file, custom, raw, ping,
        // approval responses, steering: nothing to write.
        break;
    }
  });
}

/**
 * Writes a UI message stream (the chunks an AI SDK chat route sends the
 * browser) into the job's reply, as writeStreamText does. An `error`
 * chunk fails the prompt with its errorText: give toUIMessageStream an
 * `onError` that returns the error's message (its default hides it behind
 * "An error occurred."). Calls that wait for a person park the prompt as
 * writeStreamText's do.
 */
export async function writeUIMessageStream(job: Job, stream: PartSource<UIMessageChunk>, opts: WriteOptions = {}): Promise<void> {
  const w = new ReplyWriter(job.reply, opts);
  await w.resume(job);
  await w.read(job.signal, stream, (chunk) => {
    switch (chunk.type) {
      case "text-start":
        w.open(chunk.id, w.textType);
        break;
      case "text-delta":
        w.delta(chunk.id, w.textType, chunk.delta);
        break;
      case "text-end":
        w.close(chunk.id, chunk.providerMetadata);
        break;
      case "reasoning-start":
        w.open(chunk.id, "reasoning");
        break;
      case "reasoning-delta":
        w.delta(chunk.id, "reasoning", chunk.delta);
        break;
      case "reasoning-end":
        w.close(chunk.id, chunk.providerMetadata);
        break;
      case "tool-input-start":
        w.toolInputStart(chunk.toolCallId, chunk.toolName);
        break;
      case "tool-input-delta":
        w.toolInputDelta(chunk.toolCallId, chunk.inputTextDelta);
        break;
      case "tool-input-available":
        w.toolCall(chunk.toolCallId, chunk.toolName, chunk.input, {
          providerExecuted: chunk.providerExecuted === true,
          toolMetadata: chunk.toolMetadata,
        });
        break;
      case "tool-input-error":
        w.toolCall(chunk.toolCallId, chunk.toolName, chunk.input, { invalid: chunk.errorText || "invalid tool call" });
        break;
      case "tool-approval-request":
        w.approvalRequest(chunk.toolCallId, chunk.isAutomatic === true);
        break;
      case "tool-output-available":
        w.toolResult(chunk.toolCallId, chunk.output, chunk.preliminary === true);
        break;
      case "tool-output-error":
        w.toolError(chunk.toolCallId, chunk.errorText);
        break;
      case "tool-output-denied":
        w.toolDenied(chunk.toolCallId);
        break;
      case "finish-step":
        w.endStep();
        break;
      case "error":
        throw new ModelStreamError(chunk.errorText);
      case "abort":
        throw stopReason(job.signal) ?? new ModelStreamError(`the model's stream was aborted${chunk.reason ? `: ${chunk.reason}` : ""}`);
      default:
        break;
    }
  });
}

/**
 * The job's context as the AI SDK's messages, for streamText's `messages`:
 * the history (toModelMessages), and for a resumed prompt its reply so
 * far, each call that waited for approval with its tool-approval-request
 * and the user's answer as a tool-approval-response, so that streamText
 * runs the approved tools (their results are written) and tells the model
 * of the denied ones (`execution-denied`, with the reason), then goes on.
 * A client tool's output or a question's answer is the call's
 * tool-result (an error-text one for the client tool's error), so the
 * model reads it and goes on; writeStreamText and writeUIMessageStream
 * write it into the call as they start.
 *
 * ```ts
 * const result = streamText({ model, messages: modelMessagesOf(job), tools, abortSignal: job.signal });
 * await writeStreamText(job, result); // may park the prompt again
 * ```
 */
export function modelMessagesOf(job: Job): ModelMessage[] {
  const out = toModelMessages(job.history);
  if (!job.resumed) return out;
  const own = toModelMessages(job.replySoFar);
  const answers: ToolContent = [];
  for (const input of job.inputs) {
    if (!input.open) continue;
    const id = input.toolCall.id;
    if (input.kind === "approval") {
      const turn = own.find(
        (m): m is AssistantModelMessage => m.role === "assistant" && typeof m.content !== "string" && m.content.some((p) => p.type === "tool-call" && p.toolCallId === id),
      );
      if (!turn || typeof turn.content === "string") continue;
      turn.content.push({ type: "tool-approval-request", approvalId: id, toolCallId: id });
      const reason = input.answer?.reason;
      answers.push({ type: "tool-approval-response", approvalId: id, approved: input.approved, ...(reason ? { reason } : {}) });
    } else {
      const failure = input.failure;
      const value = failure ?? (input.kind === "client_tool" ? input.answer?.output : input.answer?.answer) ?? "";
      answers.push({
        type: "tool-result",
        toolCallId: id,
        toolName: input.name,
        output: failure !== undefined ? { type: "error-text", value: failure } : { type: "text", value },
      });
    }
  }
  if (answers.length > 0) {
    // The AI SDK reads the answers from the last message, a tool message.
    const last = own.at(-1);
    if (last?.role === "tool") last.content.push(...answers);
    else own.push({ role: "tool", content: answers });
  }
  return [...out, ...own];
}

/**
 * A prompt's history as the AI SDK's messages, for streamText's
 * `messages`: user and system text (a user message's files as file
 * parts: `{type: "file", data, mediaType, filename}`), each assistant
 * turn's text and tool calls (convo's tool call ids), and a tool message with each call's
 * result (an error result for a failed call).
 */
export function toModelMessages(history: HistoryMessage[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const m of history) {
    switch (m.role) {
      case "user":
        out.push(m.files?.length ? { role: "user", content: userContent(m.text, m.files) } : { role: "user", content: m.text });
        break;
      case "system":
        out.push({ role: "system", content: m.text });
        break;
      case "assistant": {
        const content: Exclude<Extract<ModelMessage, { role: "assistant" }>["content"], string> = [];
        if (m.text !== "") content.push({ type: "text", text: m.text });
        for (const c of m.toolCalls) content.push({ type: "tool-call", toolCallId: c.id, toolName: c.name, input: c.input });
        out.push({ role: "assistant", content });
        break;
      }
      case "tool":
        out.push({
          role: "tool",
          content: [
            {
              type: "tool-result",
              toolCallId: m.toolCallId,
              toolName: m.toolName,
              output: m.isError ? { type: "error-text", value: m.output } : { type: "text", value: m.output },
            },
          ],
        });
        break;
    }
  }
  return out;
}

/**
 * A user message holding files: its text, then each file as a file part
 * (its bytes, its media type without parameters, its filename), or, when
 * the runtime did not read its bytes (a file in S3, or one past
 * maxFileBytes), a line of text naming it.
 */
function userContent(text: string, files: PromptFile[]): UserContent {
  const content: Exclude<UserContent, string> = [];
  if (text !== "") content.push({ type: "text", text });
  for (const f of files) {
    const mediaType = f.mediaType.split(";")[0].trim().toLowerCase();
    if (f.data) content.push({ type: "file", data: f.data, mediaType, filename: f.filename });
    else content.push({ type: "text", text: `The user attached ${f.filename} (${mediaType}, ${f.size} bytes); its content is not available to this worker.` });
  }
  return content;
}

/** The parts of a streamText result, or the stream given. */
function partsOf<T>(source: { readonly stream: PartSource<T> } | { readonly fullStream: PartSource<T> } | PartSource<T>): PartSource<T> {
  if (typeof (source as ReadableStream<T>).getReader === "function" || Symbol.asyncIterator in (source as object)) {
    return source as PartSource<T>;
  }
  if ("stream" in source) return source.stream;
  if ("fullStream" in source) return source.fullStream;
  throw new WorkerError("invalid_argument", "writeStreamText: give a streamText result or its stream");
}

function stopReason(signal: AbortSignal): unknown {
  return signal.aborted ? (signal.reason ?? new WorkerError("cancelled", "the prompt was stopped")) : undefined;
}

/**
 * Iterates source until it ends or signal fires (then it throws the
 * signal's reason, and cancels the source): a model that ignores the
 * signal does not hold the reply.
 */
async function* readUntilStopped<T>(signal: AbortSignal, source: PartSource<T>): AsyncGenerator<T> {
  const it: AsyncIterator<T> =
    Symbol.asyncIterator in source ? (source as AsyncIterable<T>)[Symbol.asyncIterator]() : readerIterator(source as ReadableStream<T>);
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<never>((_, reject) => {
    onAbort = () => reject(stopReason(signal));
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  stopped.catch(() => {});
  try {
    for (;;) {
      const next = await Promise.race([it.next(), stopped]);
      if (next.done) return;
      yield next.value;
    }
  } finally {
    if (onAbort) signal.removeEventListener("abort", onAbort);
    // Stop the source (and the model's request behind it); it may be
    // mid-read, so its answer is not awaited.
    void Promise.resolve(it.return?.()).catch(() => {});
  }
}

function readerIterator<T>(stream: ReadableStream<T>): AsyncIterator<T> {
  const reader = stream.getReader();
  return {
    next: () => reader.read() as Promise<IteratorResult<T>>,
    return: async () => {
      await reader.cancel().catch(() => {});
      return { done: true, value: undefined };
    },
  };
}

/** A call the model made, not recorded yet: what the stream says of it next decides how it is recorded. */
interface MadeCall {
  s: StreamingToolCall;
  input: unknown;
  /** The provider ran it (its result comes from the provider, maybe in a later step). */
  providerExecuted: boolean;
  /** The tool's metadata (the AI SDK's toolMetadata): questionMetadata makes a call nobody ran a question. */
  toolMetadata: unknown;
}

/** The state shared by both adapters: the parts' ids mapped to blocks and calls. */
class ReplyWriter {
  private readonly blocks = new Map<string, Block>();
  private readonly pendingCalls = new Map<string, StreamingToolCall>();
  private readonly calls = new Map<string, ToolCall>();
  /**
   * Calls the model made, recorded once the stream says what becomes of
   * them: their result or error (the AI SDK ran them), an approval
   * request (they wait for the user), or the end of their step without
   * either (nobody ran them: they wait for the client or the user).
   */
  private readonly unrecorded = new Map<string, MadeCall>();
  /** Calls that wait for a person: the prompt is parked when the stream ends. */
  private readonly waiting: InputRequest[] = [];
  /** What a resumed call denied by the user fails with (denied by the user: <reason>). */
  private readonly denials = new Map<string, string>();
  readonly textType: "text" | "structured";

  constructor(
    private readonly reply: Reply,
    opts: WriteOptions,
  ) {
    this.textType = opts.textAs ?? "text";
  }

  /** A part's block opens at its first delta: an empty part makes no block. */
  open(_id: string, _type: string): void {}

  delta(id: string, type: string, text: string): void {
    if (text === "") return;
    let b = this.blocks.get(id);
    if (!b || b.type !== type) {
      b = this.reply.startBlock(type);
      this.blocks.set(id, b);
    }
    b.append(text);
  }

  close(id: string, providerMetadata?: unknown): void {
    const b = this.blocks.get(id);
    if (!b) return;
    this.blocks.delete(id);
    b.end(providerMetadata && typeof providerMetadata === "object" ? { providerMetadata } : undefined);
  }

  toolInputStart(id: string, name: string): void {
    if (this.pendingCalls.has(id) || this.calls.has(id)) return;
    this.pendingCalls.set(id, this.reply.startToolCall(name, id));
  }

  toolInputDelta(id: string, delta: string): void {
    this.pendingCalls.get(id)?.inputDelta(delta);
  }

  /**
   * Writes each part of source with write until the stream ends (then
   * end()), or until it fails: an `error` or `abort` part, a handler's
   * mistake, a refused write. A failed stream records the calls the model
   * made that were not recorded yet (those waiting for what the stream
   * would say of them, and those waiting for a person), so that the
   * prompt's failure fails them ("prompt failed before the tool call
   * finished"): the reply keeps each call the model made, maybe already
   * running, instead of a tool_use block with no call. Once the job's
   * signal fired nothing more is written.
   */
  async read<T>(signal: AbortSignal, source: PartSource<T>, write: (part: T) => void): Promise<void> {
    try {
      for await (const part of readUntilStopped(signal, source)) write(part);
    } catch (err) {
      if (!signal.aborted) this.recordMade();
      throw err;
    }
    await this.end();
  }

  /** Records every call the model made that is not recorded, the waiting ones with no request (the stream failed before they could wait). */
  private recordMade(): void {
    try {
      for (const id of [...this.unrecorded.keys()]) this.record(id);
      for (const r of this.waiting.splice(0)) {
        if (r.call instanceof StreamingToolCall) r.call.call(r.input);
      }
    } catch {
      // The reply stopped (a refused write): the failure that follows
      // says why, and nothing more can be written.
    }
  }

  /**
   * A resumed prompt: the calls that waited become the stream's (the AI
   * SDK reports an approved call's result, or its denial, under convo's
   * id, which modelMessagesOf gave it); a client tool's output or a
   * question's answer ends its call now.
   */
  async resume(job: Job): Promise<void> {
    const settle: PromptInput[] = [];
    for (const input of job.inputs) {
      if (!input.open) continue;
      if (input.kind !== "approval") {
        settle.push(input);
        continue;
      }
      this.calls.set(input.toolCall.id, input.toolCall);
      const failure = input.failure;
      if (failure !== undefined) this.denials.set(input.toolCall.id, failure);
    }
    for (const input of settle) await input.settle();
  }

  /**
   * The model made a call (its input complete). An invalid one is recorded
   * and failed at once; any other waits for what the stream says of it
   * next. A tool's metadata the adapter cannot read is refused here, by
   * name, before the call is recorded.
   */
  toolCall(id: string, name: string, input: unknown, how: { invalid?: string; providerExecuted?: boolean; toolMetadata?: unknown }): void {
    if (this.calls.has(id) || this.unrecorded.has(id)) return;
    if (!how.invalid) checkToolMetadata(name, how.toolMetadata);
    let s = this.pendingCalls.get(id);
    if (!s) {
      // No streamed input: the whole input as the block's text.
      s = this.reply.startToolCall(name, id);
      s.inputDelta(JSON.stringify(input ?? {}));
    }
    this.pendingCalls.delete(id);
    // convo's rule for accepted JSON, on the arguments as the model sent
    // them: the AI SDK has parsed them already ({"expression": 1e400}
    // is {expression: Infinity}, which JSON.stringify would write as
    // null). A call that breaks it fails as an invalid call does, its
    // arguments kept as the text the model sent.
    const problem = how.invalid ? undefined : jsonlimit.check(s.inputText);
    if (problem !== undefined) {
      how = { ...how, invalid: `invalid arguments for tool ${name}: ${problem}` };
      input = s.inputText;
    }
    if (how.invalid) {
      this.calls.set(id, s.call(input));
      this.toolError(id, how.invalid);
      return;
    }
    this.unrecorded.set(id, { s, input, providerExecuted: how.providerExecuted === true, toolMetadata: how.toolMetadata });
  }

  /** The AI SDK asks for the user's approval of a call: the call waits (unless the SDK decided it by itself). */
  approvalRequest(id: string, automatic: boolean): void {
    const made = this.unrecorded.get(id);
    if (!made) return;
    if (automatic) {
      this.record(id);
      return;
    }
    this.unrecorded.delete(id);
    this.waiting.push({ call: made.s, input: made.input ?? {}, kind: "approval" });
  }

  /**
   * The end of a step: the AI SDK has run every call it runs (it ends a
   * step once their results are in), so a call still without a result
   * was run by nobody: a client tool's, or a question. It waits for its
   * input. A provider-executed call is recorded and left open (the
   * provider may send its result in a later step); a question whose input
   * is not one fails, saying which field.
   */
  endStep(): void {
    for (const [id, made] of this.unrecorded) {
      if (made.providerExecuted) {
        this.record(id);
        continue;
      }
      const pause = pauseOf(made.s.name, made.input, made.toolMetadata);
      if ("error" in pause) {
        this.record(id);
        this.toolError(id, pause.error);
        continue;
      }
      this.unrecorded.delete(id);
      this.waiting.push({ call: made.s, input: made.input ?? {}, kind: pause.kind, request: pause.request });
    }
  }

  /** Records a call the model made, if it is not yet. */
  private record(id: string): void {
    const made = this.unrecorded.get(id);
    if (!made) return;
    this.unrecorded.delete(id);
    this.calls.set(id, made.s.call(made.input));
  }

  toolDenied(id: string): void {
    this.toolError(id, this.denials.get(id) ?? "denied by the user");
  }

  /** A result of the call: the AI SDK runs it. A preliminary result records the call (it runs) and writes nothing. */
  toolResult(id: string, output: unknown, preliminary = false): void {
    this.record(id);
    if (preliminary) return;
    const call = this.calls.get(id);
    if (!call) return;
    this.calls.delete(id);
    call.complete(typeof output === "string" ? output : JSON.stringify(output ?? null));
  }

  toolError(id: string, error: string): void {
    this.record(id);
    const call = this.calls.get(id);
    if (!call) return;
    this.calls.delete(id);
    call.fail(error.trim() === "" ? "the tool failed without saying why" : error);
  }

  /**
   * The stream ended: it ends the last step (a stream without finish-step
   * parts has one), blocks left open end, and the calls that wait for a
   * person park the prompt, all their requests with wait_prompt in one
   * transaction (Reply.waitForInput). A provider-executed call left
   * without a result stays open for the handler to settle.
   */
  private async end(): Promise<void> {
    this.endStep();
    for (const id of [...this.blocks.keys()]) this.close(id);
    if (this.waiting.length > 0) await this.reply.waitForInput(this.waiting);
  }
}
