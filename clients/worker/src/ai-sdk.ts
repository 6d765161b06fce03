// @convo/worker/ai-sdk: the adapter from the AI SDK (package "ai", v7) to
// a convo reply. writeStreamText writes a streamText result (its `stream`,
// formerly `fullStream`), writeUIMessageStream a UI message stream (what
// an AI SDK chat route returns: toUIMessageStream, createUIMessageStream):
// text and reasoning become blocks, tool calls (their input as it
// streams) tool_use blocks with their recorded calls, tool results and
// errors complete or fail the calls (each with its tool_result block), and
// an `error` part fails the prompt with the model's error text. A tool
// with `needsApproval` pauses the prompt: its tool-approval-request parts
// become approval requests, and the prompt is parked (wait_prompt); once
// answered, modelMessagesOf gives streamText the answers as
// tool-approval-response parts, so the AI SDK runs the approved tools
// itself. The runtime (./worker.ts) does the rest: batching, leases,
// cancel.

import type { AssistantModelMessage, ModelMessage, TextStreamPart, ToolContent, ToolSet, UIMessageChunk } from "ai";
import { WorkerError, messageOf } from "./errors.js";
import type { HistoryMessage } from "./history.js";
import type { Job } from "./job.js";
import type { PromptInput } from "./inputs.js";
import type { Block, InputRequest, Reply, StreamingToolCall, ToolCall } from "./reply.js";

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
 * ```ts
 * const result = streamText({ model, messages: toModelMessages(job.history), tools, abortSignal: job.signal });
 * await writeStreamText(job, result);
 * ```
 */
export async function writeStreamText<TOOLS extends ToolSet>(job: Job, source: StreamTextSource<TOOLS>, opts: WriteOptions = {}): Promise<void> {
  const w = new ReplyWriter(job.reply, opts);
  await w.resume(job);
  for await (const part of readUntilStopped(job.signal, partsOf(source))) {
    if (part.type === "tool-approval-request") {
      w.approvalRequest(part.toolCall.toolCallId, part.isAutomatic === true);
      continue;
    }
    w.recordCalls();
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
        w.toolCall(part.toolCallId, part.toolName, part.input, part.invalid ? messageOf(part.error ?? "invalid tool call") : undefined);
        break;
      case "tool-result":
        if (!part.preliminary) w.toolResult(part.toolCallId, part.output);
        break;
      case "tool-error":
        w.toolError(part.toolCallId, messageOf(part.error));
        break;
      case "tool-output-denied":
        w.toolDenied(part.toolCallId);
        break;
      case "error":
        throw new ModelStreamError(messageOf(part.error), { cause: part.error });
      case "abort":
        throw stopReason(job.signal) ?? new ModelStreamError(`the model's stream was aborted${part.reason ? `: ${part.reason}` : ""}`);
      default:
        // start, start-step, finish-step, finish, source, file, custom,
        // raw, ping, approval responses, steering: nothing to write.
        break;
    }
  }
  await w.end();
}

/**
 * Writes a UI message stream (the chunks an AI SDK chat route sends the
 * browser) into the job's reply, as writeStreamText does. An `error`
 * chunk fails the prompt with its errorText: give toUIMessageStream an
 * `onError` that returns the error's message (its default hides it behind
 * "An error occurred.").
 */
export async function writeUIMessageStream(job: Job, stream: PartSource<UIMessageChunk>, opts: WriteOptions = {}): Promise<void> {
  const w = new ReplyWriter(job.reply, opts);
  await w.resume(job);
  for await (const chunk of readUntilStopped(job.signal, stream)) {
    if (chunk.type === "tool-approval-request") {
      w.approvalRequest(chunk.toolCallId, chunk.isAutomatic === true);
      continue;
    }
    w.recordCalls();
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
        w.toolCall(chunk.toolCallId, chunk.toolName, chunk.input);
        break;
      case "tool-input-error":
        w.toolCall(chunk.toolCallId, chunk.toolName, chunk.input, chunk.errorText);
        break;
      case "tool-output-available":
        if (!chunk.preliminary) w.toolResult(chunk.toolCallId, chunk.output);
        break;
      case "tool-output-error":
        w.toolError(chunk.toolCallId, chunk.errorText);
        break;
      case "tool-output-denied":
        w.toolDenied(chunk.toolCallId);
        break;
      case "error":
        throw new ModelStreamError(chunk.errorText);
      case "abort":
        throw stopReason(job.signal) ?? new ModelStreamError(`the model's stream was aborted${chunk.reason ? `: ${chunk.reason}` : ""}`);
      default:
        break;
    }
  }
  await w.end();
}

/**
 * The job's context as the AI SDK's messages, for streamText's `messages`:
 * the history (toModelMessages), and for a resumed prompt its reply so
 * far, each call that waited for approval with its tool-approval-request
 * and the user's answer as a tool-approval-response, so that streamText
 * runs the approved tools (their results are written) and tells the model
 * of the denied ones (`execution-denied`, with the reason), then goes on.
 * A client tool's output or a question's answer is the call's tool
 * result (writeStreamText writes it).
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
 * `messages`: user and system text, each assistant turn's text and tool
 * calls (convo's tool call ids), and a tool message with each call's
 * result (an error result for a failed call).
 */
export function toModelMessages(history: HistoryMessage[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const m of history) {
    switch (m.role) {
      case "user":
        out.push({ role: "user", content: m.text });
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

/** The state shared by both adapters: the parts' ids mapped to blocks and calls. */
class ReplyWriter {
  private readonly blocks = new Map<string, Block>();
  private readonly pendingCalls = new Map<string, StreamingToolCall>();
  private readonly calls = new Map<string, ToolCall>();
  /** Calls the model made, recorded at the next part unless an approval request for them comes first. */
  private readonly unrecorded = new Map<string, { s: StreamingToolCall; input: unknown }>();
  /** Calls that wait for the user's approval: the prompt is parked when the stream ends. */
  private readonly approvals: InputRequest[] = [];
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

  toolCall(id: string, name: string, input: unknown, invalid?: string): void {
    if (this.calls.has(id) || this.unrecorded.has(id)) return;
    let s = this.pendingCalls.get(id);
    if (!s) {
      // No streamed input: the whole input as the block's text.
      s = this.reply.startToolCall(name, id);
      s.inputDelta(JSON.stringify(input ?? {}));
    }
    this.pendingCalls.delete(id);
    if (invalid) {
      this.calls.set(id, s.call(input));
      this.toolError(id, invalid);
      return;
    }
    // Recorded at the next part: an approval request for it may follow.
    this.unrecorded.set(id, { s, input });
  }

  /** The AI SDK asks for the user's approval of a call: the call waits (unless the SDK decided it by itself). */
  approvalRequest(id: string, automatic: boolean): void {
    const u = this.unrecorded.get(id);
    if (!u) return;
    if (automatic) {
      this.recordCalls();
      return;
    }
    this.unrecorded.delete(id);
    this.approvals.push({ call: u.s, input: u.input ?? {}, kind: "approval" });
  }

  /** Records the calls the model made that wait for nobody. */
  recordCalls(): void {
    for (const [id, u] of this.unrecorded) this.calls.set(id, u.s.call(u.input));
    this.unrecorded.clear();
  }

  toolDenied(id: string): void {
    this.toolError(id, this.denials.get(id) ?? "denied by the user");
  }

  toolResult(id: string, output: unknown): void {
    const call = this.calls.get(id);
    if (!call) return;
    this.calls.delete(id);
    call.complete(typeof output === "string" ? output : JSON.stringify(output ?? null));
  }

  toolError(id: string, error: string): void {
    const call = this.calls.get(id);
    if (!call) return;
    this.calls.delete(id);
    call.fail(error.trim() === "" ? "the tool failed without saying why" : error);
  }

  /**
   * The stream ended: blocks left open end; tool calls left open stay for
   * the handler to settle; calls that wait for approval park the prompt.
   */
  async end(): Promise<void> {
    this.recordCalls();
    for (const id of [...this.blocks.keys()]) this.close(id);
    if (this.approvals.length > 0) await this.reply.waitForInput(this.approvals);
  }
}
