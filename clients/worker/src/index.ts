// @convo/worker: the TypeScript worker runtime of convo. A Worker claims
// prompts (convo.claim_prompts), keeps them alive with one lease per process, runs a handler for
// each with the conversation's history, an AbortSignal and a Reply to
// write with, and writes every reply of the process in shared
// transactions (convo.write_batch), exactly once across retries.
// "@convo/worker/ai-sdk" writes an AI SDK streamText result into a reply.
// docs/workers-typescript.md is its guide.

export { Worker } from "./worker.js";
export type { Job } from "./job.js";
export type { WorkerOptions, Logger, Settled } from "./options.js";
export { Reply, Block, ToolCall, StreamingToolCall, type StreamedKind, type InputRequest } from "./reply.js";
export { PromptInput, type InputAnswer, type InputResult } from "./inputs.js";
export type { InputKind } from "./ops.js";
export type { HistoryMessage, HistoryToolCall, PromptFile } from "./history.js";
export { WorkerError, isWorkerError, isStopped, type WorkerErrorCode } from "./errors.js";
