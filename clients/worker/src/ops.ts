// The ops of convo.write_batch (docs/worker-api.md, "Many replies in one
// transaction"): each one call of the SQL worker API, named by the prompt
// it writes. The runtime makes the ids of new blocks and tool calls
// itself, so a reply never waits for an answer to go on.

export type Op =
  | { op: "start_prompt" }
  | { op: "start_block"; block: string; type: string; metadata?: Record<string, unknown> }
  | { op: "append"; block: string; text: string; seq?: number }
  | { op: "end_block"; block: string; metadata?: Record<string, unknown> }
  | { op: "start_tool_call"; block: string; toolCall: string; name: string; input: unknown }
  | { op: "tool_progress"; toolCall: string; text: string }
  | { op: "complete_tool_call"; toolCall: string; output?: string }
  | { op: "fail_tool_call"; toolCall: string; error: string }
  | { op: "request_input"; toolCall: string; kind: InputKind; request?: Record<string, unknown>; expiresAt?: string }
  | { op: "wait_prompt" }
  | { op: "complete_prompt" }
  | { op: "fail_prompt"; error: string };

/** What a tool call waits for (docs/worker-api.md, "Pauses"): an approval, a client tool's output, or an answer to a question. */
export type InputKind = "approval" | "client_tool" | "question";

/**
 * An op's weight in a batch's budget, in appends (as the Go runtime
 * weighs them): starting and ending a prompt write several rows and
 * events, a block or a tool call a few.
 */
export function costOf(o: Op): number {
  switch (o.op) {
    case "append":
    case "tool_progress":
      return 1;
    case "start_prompt":
      return 12;
    case "complete_prompt":
    case "fail_prompt":
      return 20;
    default:
      return 4;
  }
}

/** What the op was doing, for errors: "append to block", "start tool call" … */
export function describe(o: Op): string {
  switch (o.op) {
    case "start_prompt":
      return "start prompt";
    case "start_block":
      return `start ${o.type} block`;
    case "append":
      return "append to block";
    case "end_block":
      return "end block";
    case "start_tool_call":
      return "start tool call";
    case "tool_progress":
      return "write tool call output";
    case "complete_tool_call":
      return "complete tool call";
    case "fail_tool_call":
      return "fail tool call";
    case "request_input":
      return `request ${o.kind} input`;
    case "wait_prompt":
      return "wait for input";
    case "complete_prompt":
      return "complete prompt";
    case "fail_prompt":
      return "fail prompt";
  }
}

/**
 * The JSON text of a batch's ops. PostgreSQL's text and jsonb cannot hold
 * NUL, and jsonb refuses a lone UTF-16 surrogate: either in a model's text
 * or a tool's output would fail the whole batch, so both are written as
 * U+FFFD.
 */
export function encodeOps(ops: Array<Op & { prompt: string }>): string {
  return JSON.stringify(ops, (_key, value: unknown) => (typeof value === "string" ? clean(value) : value));
}

/** s as written: lone surrogates and NUL become U+FFFD (see encodeOps). */
export function clean(s: string): string {
  const wellFormed = s.isWellFormed() ? s : s.toWellFormed();
  return wellFormed.includes("\0") ? wellFormed.replaceAll("\0", "\uFFFD") : wellFormed;
}
