// What a handler is given: one claimed prompt.

import type { HistoryMessage } from "./history.js";
import type { PromptInput } from "./inputs.js";
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
   * The prompt paused for input before (Reply.waitForInput) and was
   * answered: its reply goes on in the same message. Act on the open
   * `inputs`, then give the model `history`, then `replySoFar` with the
   * results.
   */
  readonly resumed: boolean;
  /**
   * A resumed prompt's reply so far (convo.prompt_reply), as the model's
   * own turns: its text, its tool calls and their results. A call that
   * waited and is still open (an open input) has no result yet: the
   * handler's settle() gives it. Empty unless resumed.
   */
  readonly replySoFar: HistoryMessage[];
  /** A resumed prompt's input requests with their answers (convo.prompt_inputs), in the order the calls started; empty unless resumed. */
  readonly inputs: PromptInput[];
  /**
   * The W3C trace context of the request that sent the prompt's message
   * (convo.prompt_trace), undefined when it had none. With
   * @opentelemetry/api installed the worker continues it already (the
   * prompt's span is active while the handler runs); these are for a
   * handler that propagates it itself.
   */
  readonly traceparent: string | undefined;
  readonly tracestate: string | undefined;
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
