// What a handler is given: one claimed prompt.

import type { HistoryMessage } from "./history.js";
import type { Reply } from "./reply.js";

export interface Job {
  /** The prompt (convo.prompts.id). */
  readonly promptId: string;
  readonly conversationId: string;
  /** The assistant message the reply is written into. */
  readonly messageId: string;
  /** The model configuration the client sent with the prompt, e.g. {"model": "small", "temperature": 0.2}; {} when none. */
  readonly modelConfig: Record<string, unknown>;
  /** Claims of this run of the prompt; more than 1 means an earlier claim was handed back unstarted. */
  readonly attempts: number;
  /** The conversation before this prompt (convo.prompt_context): the model's context. */
  readonly history: HistoryMessage[];
  /**
   * Fires when the handler must stop: the user cancelled the prompt, the
   * worker lost its lease, the worker is stopping, or a write was refused.
   * `signal.reason` is the WorkerError saying which. Pass it to the model
   * (streamText's abortSignal) so the model's request stops at once; after
   * it fires, nothing more of the reply is written.
   */
  readonly signal: AbortSignal;
  /** Writes the reply: text, reasoning, structured output, tool calls. */
  readonly reply: Reply;
}
