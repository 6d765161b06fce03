// The tools of the AI SDK adapter that wait for a person without an
// approval: a client tool (an AI SDK tool without `execute`: the browser
// runs it) and a question to the user. The AI SDK leaves such a call
// without a result and stops; the adapter parks the prompt on it (an input
// request of kind client_tool or question). What tells the two apart is
// the tool's own `metadata`, which the AI SDK never sends to the model and
// copies onto every part of the tool's calls (`toolMetadata`), in
// streamText's stream and in the UI message stream alike: so the marker
// travels with the tool into every handler and agent that uses it, and
// the adapter, which sees only parts, reads it off the call.

import { jsonSchema, tool, type JSONValue, type Tool } from "ai";
import { WorkerError } from "./errors.js";
import type { InputKind } from "./ops.js";

/** A JSON object, as a tool's `metadata` is. */
export type JSONObject = { [key: string]: JSONValue };

/** The key of a tool's `metadata` the adapter reads. */
const metadataKey = "convo";

/**
 * The `metadata` of an AI SDK tool whose calls are questions to the user:
 * `tool({ description, inputSchema, metadata: questionMetadata })`, with
 * no `execute`. The call's input is the question, `{question, choices?}`
 * (choices: the answers the user may pick from), and the user's answer is
 * the tool's result. askUser() is such a tool.
 */
export const questionMetadata: JSONObject = { [metadataKey]: { input: "question" } };

/**
 * The `metadata` of an AI SDK client tool (no `execute`) whose output is
 * JSON of outputSchema: the request hands the schema to the client, and
 * convo.answer_input refuses an output of another JSON type. A client tool
 * needs no metadata otherwise.
 */
export function clientToolMetadata(outputSchema: JSONObject): JSONObject {
  if (typeof outputSchema !== "object" || outputSchema === null || Array.isArray(outputSchema)) {
    throw new WorkerError("invalid_argument", "clientToolMetadata: outputSchema must be a JSON object (a JSON Schema)");
  }
  return { [metadataKey]: { input: "client_tool", outputSchema } };
}

/** The name the Go runtime gives its question tool (worker.AskUserName), and askUser's. */
export const askUserName = "ask_user";

/**
 * The ask_user tool, as the Go runtime's worker.AskUser(): the model asks
 * the user a question (`{"question": "…", "choices": ["…", …]}`, choices
 * optional), the prompt waits for the answer holding nothing, and the
 * answer is the tool's result. Add it to streamText's tools under
 * askUserName: `tools: { [askUserName]: askUser(), … }`.
 */
export function askUser(opts: { description?: string } = {}): Tool<{ question: string; choices?: string[] }, never> {
  return tool({
    description:
      opts.description ??
      "Asks the user a question and waits for the answer. Use it when you need the user to decide or to tell you something only they know. Give choices when the answer is one of a few options.",
    inputSchema: jsonSchema<{ question: string; choices?: string[] }>({
      type: "object",
      properties: {
        question: { type: "string", minLength: 1, pattern: "\\S", description: "the question, as the user will read it" },
        choices: {
          type: "array",
          items: { type: "string", minLength: 1, pattern: "\\S" },
          minItems: 1,
          uniqueItems: true,
          description: "the answers the user may pick from (optional)",
        },
      },
      required: ["question"],
      additionalProperties: false,
    }),
    metadata: questionMetadata,
  });
}

/** What a call nobody ran asks for: its kind and request, or why it cannot ask (the call fails with it). */
export type Pause = { kind: Extract<InputKind, "client_tool" | "question">; request: Record<string, unknown> } | { error: string };

/**
 * Checks a tool's metadata marker when its call arrives: a marker the
 * adapter cannot read is the handler's mistake, refused by name
 * (invalid_argument) before anything of the call is recorded.
 */
export function checkToolMetadata(toolName: string, toolMetadata: unknown): void {
  markerOf(toolName, toolMetadata);
}

/**
 * What a call of toolName that no one ran (the AI SDK left it without a
 * result) asks for: a question when its tool carries questionMetadata
 * (the request is the input's question and choices), else a client tool's
 * output (with the outputSchema of clientToolMetadata, if any).
 */
export function pauseOf(toolName: string, input: unknown, toolMetadata: unknown): Pause {
  const marker = markerOf(toolName, toolMetadata);
  if (marker?.input !== "question") {
    return { kind: "client_tool", request: marker?.outputSchema ? { outputSchema: marker.outputSchema } : {} };
  }
  const fields = (typeof input === "object" && input !== null ? input : {}) as { question?: unknown; choices?: unknown };
  if (typeof fields.question !== "string" || !/\S/.test(fields.question)) {
    return { error: `${toolName}: input.question must be a text that shows something` };
  }
  if (fields.choices === undefined || fields.choices === null) return { kind: "question", request: { question: fields.question } };
  const choices = fields.choices;
  if (!Array.isArray(choices) || choices.length === 0 || !choices.every((c) => typeof c === "string" && /\S/.test(c))) {
    return { error: `${toolName}: input.choices must be a non-empty list of texts that show something` };
  }
  if (new Set(choices).size !== choices.length) return { error: `${toolName}: input.choices must be distinct` };
  return { kind: "question", request: { question: fields.question, choices } };
}

interface Marker {
  input: "question" | "client_tool";
  outputSchema?: JSONObject;
}

function markerOf(toolName: string, toolMetadata: unknown): Marker | undefined {
  if (typeof toolMetadata !== "object" || toolMetadata === null) return undefined;
  const m = (toolMetadata as Record<string, unknown>)[metadataKey];
  if (m === undefined) return undefined;
  const refuse = (what: string) => new WorkerError("invalid_argument", `tool ${toolName}: metadata.${metadataKey}${what}`);
  if (typeof m !== "object" || m === null || Array.isArray(m)) throw refuse(" must be an object (questionMetadata, clientToolMetadata)");
  const { input, outputSchema, ...rest } = m as Record<string, unknown>;
  if (input !== "question" && input !== "client_tool") throw refuse(`.input must be "question" or "client_tool", got ${JSON.stringify(input)}`);
  const extra = Object.keys(rest);
  if (extra.length > 0) throw refuse(` takes input and outputSchema, not ${JSON.stringify(extra[0])}`);
  if (outputSchema !== undefined) {
    if (input !== "client_tool") throw refuse(".outputSchema is for a client tool");
    if (typeof outputSchema !== "object" || outputSchema === null || Array.isArray(outputSchema)) {
      throw refuse(".outputSchema must be a JSON object (a JSON Schema)");
    }
  }
  return { input, ...(outputSchema !== undefined ? { outputSchema: outputSchema as JSONObject } : {}) };
}
