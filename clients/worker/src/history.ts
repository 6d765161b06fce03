// The model's context: the finished blocks of the messages before the
// prompt's own (convo.prompt_context, read the same way by every
// runtime), as messages. The Go runtime's history.go does the same for Go
// models; toModelMessages (in ./ai-sdk) turns these into the AI SDK's.

import type { ContextRow } from "./sql.js";

/** A tool call the assistant made, as the history holds it. */
export interface HistoryToolCall {
  /** convo's id of the call (convo.tool_calls.id). */
  id: string;
  name: string;
  /** The parsed arguments; the raw text when they were not JSON. */
  input: unknown;
}

/** One message of a prompt's history. */
export type HistoryMessage =
  | { role: "user" | "system"; text: string }
  /** An assistant turn: its text, then the tool calls it made (each answered by a following tool message). */
  | { role: "assistant"; text: string; toolCalls: HistoryToolCall[] }
  /** The result of a tool call: its tool_result block, or else the call's own output or error. */
  | { role: "tool"; toolCallId: string; toolName: string; output: string; isError: boolean };

interface Pending {
  call: HistoryToolCall;
  fallback: string;
  fallbackIsError: boolean;
  result?: { text: string; isError: boolean };
}

/** The history of a prompt from its context rows, in order. */
export function historyOf(rows: ContextRow[]): HistoryMessage[] {
  const out: HistoryMessage[] = [];
  for (let start = 0; start < rows.length; ) {
    let end = start;
    while (end < rows.length && rows[end].message_id === rows[start].message_id) end++;
    const msg = rows.slice(start, end);
    start = end;
    const role = msg[0].role;
    if (role === "assistant") {
      out.push(...assistantTurns(msg));
    } else if (role === "user" || role === "system") {
      const parts = msg.filter((b) => b.block_type === "text" || b.block_type === "structured").map((b) => b.content);
      if (parts.length > 0) out.push({ role, text: parts.join("\n\n") });
    }
  }
  return out;
}

/**
 * An assistant message's blocks as turns: text followed by tool calls;
 * the calls' results close the turn, and text after them starts the next.
 */
function assistantTurns(blocks: ContextRow[]): HistoryMessage[] {
  const out: HistoryMessage[] = [];
  let text = "";
  let calls: Pending[] = [];
  let answered = false;
  const closeTurn = () => {
    if (text === "" && calls.length === 0) return;
    out.push({ role: "assistant", text, toolCalls: calls.map((c) => c.call) });
    for (const c of calls) {
      const r = c.result ?? { text: c.fallback, isError: c.fallbackIsError };
      out.push({ role: "tool", toolCallId: c.call.id, toolName: c.call.name, output: r.text, isError: r.isError });
    }
    text = "";
    calls = [];
    answered = false;
  };
  for (const b of blocks) {
    switch (b.block_type) {
      case "text":
      case "structured":
        if (calls.length > 0) closeTurn();
        text += b.content;
        break;
      case "tool_use": {
        if (!b.tool_call_id || !b.tool_name) break; // arguments without a recorded call: nothing ran
        if (answered) closeTurn();
        const failed = !!b.tool_error;
        calls.push({
          call: { id: b.tool_call_id, name: b.tool_name, input: b.tool_input ?? {} },
          fallback: failed ? `error: ${b.tool_error}` : b.tool_output || "(no result)",
          fallbackIsError: failed,
        });
        break;
      }
      case "tool_result": {
        answered = true;
        const meta = b.metadata ?? {};
        const isError = meta.isError === true;
        const named = typeof meta.toolCallId === "string" ? calls.find((c) => c.call.id === meta.toolCallId) : undefined;
        const c = named ?? calls.find((c) => c.result === undefined);
        if (c) c.result = { text: b.content, isError };
        else text += `\n\n${b.content}`; // a result for no call we know: keep it as text
        break;
      }
    }
  }
  closeTurn();
  return out;
}
