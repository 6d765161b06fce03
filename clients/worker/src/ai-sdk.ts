// @convo/worker/ai-sdk: the adapter from the AI SDK (package "ai", v7) to
// a convo reply. writeStreamText writes a streamText result (its `stream`,
// formerly `fullStream`), writeUIMessageStream a UI message stream (what
// an AI SDK chat route returns: toUIMessageStream, createUIMessageStream):
// text and reasoning become blocks, tool calls (their input as it
// streams) tool_use blocks with their recorded calls, tool results and
// errors complete or fail the calls (each with its tool_result block), and
// an `error` part fails the prompt with the model's error text. The
// runtime (./worker.ts) does the rest: batching, leases, cancel.

import type { ModelMessage, TextStreamPart, ToolSet, UIMessageChunk } from "ai";
import { WorkerError, messageOf } from "./errors.js";
import type { HistoryMessage } from "./history.js";
import type { Job } from "./job.js";
import type { Block, Reply, StreamingToolCall, ToolCall } from "./reply.js";

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
  for await (const part of readUntilStopped(job.signal, partsOf(source))) {
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
        w.toolError(part.toolCallId, "denied by the user");
        break;
      case "error":
        throw new ModelStreamError(messageOf(part.error), { cause: part.error });
      case "abort":
        throw stopReason(job.signal) ?? new ModelStreamError(`the model's stream was aborted${part.reason ? `: ${part.reason}` : ""}`);
      default:
        // start, start-step, finish-step, finish, source, file, custom,
        // raw, ping, approvals, steering: nothing to write.
        break;
    }
  }
  w.end();
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
  for await (const chunk of readUntilStopped(job.signal, stream)) {
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
        w.toolError(chunk.toolCallId, "denied by the user");
        break;
      case "error":
        throw new ModelStreamError(chunk.errorText);
      case "abort":
        throw stopReason(job.signal) ?? new ModelStreamError(`the model's stream was aborted${chunk.reason ? `: ${chunk.reason}` : ""}`);
      default:
        break;
    }
  }
  w.end();
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

  toolCall(id: string, name: string, input: unknown, invalid?: string): void {
    if (this.calls.has(id)) return;
    let s = this.pendingCalls.get(id);
    if (!s) {
      // No streamed input: the whole input as the block's text.
      s = this.reply.startToolCall(name, id);
      s.inputDelta(JSON.stringify(input ?? {}));
    }
    this.pendingCalls.delete(id);
    const call = s.call(input);
    this.calls.set(id, call);
    if (invalid) this.toolError(id, invalid);
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

  /** The stream ended: blocks left open end; tool calls left open stay for the handler to settle. */
  end(): void {
    for (const id of [...this.blocks.keys()]) this.close(id);
  }
}
