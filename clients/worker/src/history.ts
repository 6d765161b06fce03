// The model's context: the finished blocks of the messages before the
// prompt's own (convo.prompt_context, read the same way by every
// runtime), as messages. The Go runtime's history.go does the same for Go
// models; toModelMessages (in ./ai-sdk) turns these into the AI SDK's.

import type { ContextRow } from "./sql.js";

/**
 * A file the user attached to a message of the context (convo.prompt_files):
 * an image, a PDF, a document.
 */
export interface PromptFile {
  id: string;
  filename: string;
  /** The media type decided from the bytes when uploaded, e.g. "image/png" or "text/plain; charset=utf-8". */
  mediaType: string;
  size: number;
  /** Lower-case hex. */
  sha256: string;
  /** Where the bytes are: "postgres" (read by the runtime) or "s3" (the object blobId of the server's bucket). */
  storage: string;
  blobId: string;
  /**
   * The bytes, read (and checked against size and sha256) before the
   * handler runs; absent for a file in S3 and one larger than the
   * worker's maxFileBytes.
   */
  data?: Uint8Array;
}

/** The files of the messages of a context, by message id, with each message's position. */
export type ContextFiles = Map<string, { position: bigint; files: PromptFile[] }>;

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
  /** A user message's files, when it holds some, follow its text (empty for a message of files only). */
  | { role: "user"; text: string; files?: PromptFile[] }
  | { role: "system"; text: string }
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

/**
 * The history of a prompt from its context rows, in order, each user
 * message with its files; a message of files only, which has no context
 * rows, is placed by its position.
 */
export function historyOf(rows: ContextRow[], files: ContextFiles = new Map()): HistoryMessage[] {
  const out: HistoryMessage[] = [];
  const present = new Set(rows.map((r) => r.message_id));
  const onlyFiles = [...files.entries()].filter(([id]) => !present.has(id)).sort(([, a], [, b]) => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0));
  const flushBefore = (position: bigint | undefined) => {
    while (onlyFiles.length > 0 && (position === undefined || onlyFiles[0][1].position < position)) {
      out.push({ role: "user", text: "", files: onlyFiles.shift()![1].files });
    }
  };
  for (let start = 0; start < rows.length; ) {
    let end = start;
    while (end < rows.length && rows[end].message_id === rows[start].message_id) end++;
    const msg = rows.slice(start, end);
    start = end;
    if (msg[0].message_position !== undefined) flushBefore(BigInt(msg[0].message_position));
    const role = msg[0].role;
    if (role === "assistant") {
      out.push(...assistantTurns(msg));
    } else if (role === "user" || role === "system") {
      const parts = msg.filter((b) => b.block_type === "text" || b.block_type === "structured").map((b) => b.content);
      const own = files.get(msg[0].message_id)?.files ?? [];
      if (role === "user" && (parts.length > 0 || own.length > 0)) {
        out.push(own.length > 0 ? { role, text: parts.join("\n\n"), files: own } : { role, text: parts.join("\n\n") });
      }
      else if (role === "system" && parts.length > 0) out.push({ role, text: parts.join("\n\n") });
    }
  }
  flushBefore(undefined);
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
