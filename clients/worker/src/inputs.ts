// A resumed prompt's input requests and their answers (convo.prompt_inputs),
// as a handler acts on them: each open one ends its tool call as the Go
// runtime does (docs/workers.md, "Pauses"), with a tool_result block the
// model reads.

import { messageOf } from "./errors.js";
import type { InputKind } from "./ops.js";
import { ToolCall, type Reply } from "./reply.js";
import type { InputRow } from "./sql.js";

/** An answer as convo.answer_input took it, or the denial its expiry wrote. */
export interface InputAnswer {
  /** approval: whether the user approved the call. */
  approved?: boolean;
  /** approval: why the user denied it (optional). */
  reason?: string;
  /** client_tool: the tool's output (JSON text, or any text). */
  output?: string;
  /** client_tool, question: the error instead of an output. */
  error?: string;
  /** question: the user's answer. */
  answer?: string;
}

/** What the model is told of a call that waited: its output, or "error: …". */
export interface InputResult {
  text: string;
  isError: boolean;
}

/** One input request of a resumed prompt, with its tool call and its answer. */
export class PromptInput {
  /**
   * The call that waited. complete() or fail() end it with its tool_result
   * block (metadata inputKind too); settle() does what its answer says.
   */
  readonly toolCall: ToolCall;
  /** The call's arguments. */
  readonly input: unknown;
  readonly kind: InputKind;
  /** What was asked (request_input's request). */
  readonly request: Record<string, unknown>;
  /** pending, answered, expired (answer is then the denial) or cancelled. */
  readonly status: "pending" | "answered" | "expired" | "cancelled";
  readonly answer: InputAnswer | null;
  readonly answeredAt: Date | null;
  readonly expiresAt: Date | null;
  /**
   * Whether the handler has to act on it: the request was answered (or
   * expired) and its call is still open. A call already ended was acted
   * on by an earlier run (or cancelled).
   */
  readonly open: boolean;

  /** @internal */
  constructor(reply: Reply, row: InputRow, callId: string) {
    this.kind = row.kind as InputKind;
    this.toolCall = new ToolCall(reply, row.tool_call_id, row.name, callId, { inputKind: row.kind });
    this.input = row.input;
    this.request = row.request ?? {};
    this.status = row.status as PromptInput["status"];
    this.answer = (row.answer as InputAnswer | null) ?? null;
    this.answeredAt = row.answered_at;
    this.expiresAt = row.expires_at;
    this.open = row.tool_call_status === "started" && (this.status === "answered" || this.status === "expired");
  }

  /** The tool's name. */
  get name(): string {
    return this.toolCall.name;
  }

  /** Whether an approval was approved. */
  get approved(): boolean {
    return this.kind === "approval" && this.answer?.approved === true;
  }

  /**
   * What the call fails with when it does not run: "denied by the user: <reason>"
   * for a denied approval ("denied: the request expired" for an expired
   * one), the client tool's or question's error; undefined when the
   * answer is an output (an approval approved, a client tool's output, a
   * question's answer).
   */
  get failure(): string | undefined {
    const a = this.answer ?? {};
    switch (this.kind) {
      case "approval": {
        if (a.approved === true) return undefined;
        const denied = this.status === "expired" ? "denied" : "denied by the user";
        return a.reason ? `${denied}: ${a.reason}` : denied;
      }
      case "client_tool":
        return typeof a.output === "string" ? undefined : a.error || "the client tool failed without saying why";
      case "question":
        return typeof a.answer === "string" ? undefined : a.error || "the question was not answered";
    }
    return `tool call ${this.toolCall.id} waited for input of an unknown kind ${JSON.stringify(this.kind)}`;
  }

  /**
   * Acts on the answer as the Go runtime does and returns what the model
   * is told: an approved call runs `run` (its value, text or JSON, is the
   * output; a throw fails the call with "tool <name> failed: <message>");
   * a denied one fails with `failure`; a client tool's output or a
   * question's answer completes the call, an error fails it. Each writes
   * the call's tool_result block.
   */
  async settle(run?: (input: unknown) => unknown): Promise<InputResult> {
    const failure = this.failure;
    if (failure !== undefined) return this.fail(failure);
    if (this.kind === "approval") {
      if (!run) return this.fail(`tool ${this.name} was approved, but no function was given to run it`);
      let out: unknown;
      try {
        out = await run(this.input);
      } catch (err) {
        return this.fail(`tool ${this.name} failed: ${messageOf(err)}`);
      }
      const text = typeof out === "string" ? out : (JSON.stringify(out ?? null) ?? "");
      this.toolCall.complete(text);
      return { text, isError: false };
    }
    const text = (this.kind === "client_tool" ? this.answer?.output : this.answer?.answer) ?? "";
    this.toolCall.complete(text);
    return { text, isError: false };
  }

  private fail(error: string): InputResult {
    this.toolCall.fail(error);
    return { text: `error: ${error}`, isError: true };
  }
}
