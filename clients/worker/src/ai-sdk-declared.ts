// The client tools a prompt's client declared (the model configuration's
// `tools`: an OpenAI Responses request's function tools, docs/worker-api.md),
// offered to the model through the AI SDK as the Go runtime offers them
// (worker/declared.go): each an AI SDK tool without `execute`, so that the
// AI SDK leaves its call without a result and the adapter parks the prompt
// on it as on any client tool's (an input request of kind client_tool),
// the client's output then the call's result.

import { jsonSchema, tool, type ToolSet } from "ai";
import { WorkerError } from "./errors.js";
import type { Job } from "./job.js";

/** A client tool the prompt declares: `{name, description?, parameters?}`. */
export interface ToolDeclaration {
  name: string;
  description?: string;
  /** A JSON Schema of an object (absent: no arguments). */
  parameters?: Record<string, unknown>;
}

const toolNameRE = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The client tools the job's prompt declares (`job.modelConfig.tools`), in
 * order; none when it declares none. A declaration that is not one (not
 * an object, a name that is not 1 to 64 letters, digits, `_` or `-`, a
 * description that is not a text, parameters that are not a JSON Schema
 * object of `"type": "object"`), or a name declared twice, is a WorkerError
 * (invalid_argument) naming it: thrown from a handler, it fails the reply.
 */
export function declaredTools(job: Pick<Job, "modelConfig">): ToolDeclaration[] {
  const raw = job.modelConfig?.tools;
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw refuse("the prompt's declared tools (modelConfig.tools) must be a list");
  const seen = new Set<string>();
  return raw.map((d: unknown, i): ToolDeclaration => {
    const at = `the prompt's declared tool ${i}`;
    if (typeof d !== "object" || d === null || Array.isArray(d)) throw refuse(`${at} must be an object {name, description?, parameters?}`);
    const { name, description, parameters } = d as Record<string, unknown>;
    if (typeof name !== "string" || !toolNameRE.test(name)) {
      throw refuse(`${at}: tool name ${JSON.stringify(name)}: want 1 to 64 letters, digits, _ or -`);
    }
    if (seen.has(name)) throw refuse(`${at}: tool ${name} is declared twice`);
    seen.add(name);
    if (description !== undefined && typeof description !== "string") throw refuse(`${at}: tool ${name}: description must be a text`);
    if (parameters !== undefined) {
      if (typeof parameters !== "object" || parameters === null || Array.isArray(parameters)) {
        throw refuse(`${at}: tool ${name}: parameters must be a JSON Schema object`);
      }
      if ((parameters as Record<string, unknown>).type !== "object") {
        throw refuse(`${at}: tool ${name}: parameters must be the schema of an object ("type": "object")`);
      }
    }
    return {
      name,
      ...(description !== undefined ? { description } : {}),
      ...(parameters !== undefined ? { parameters: parameters as Record<string, unknown> } : {}),
    };
  });
}

/**
 * The tools to give streamText for the job: the worker's own `tools` and
 * the client tools its prompt declares, each an AI SDK tool without
 * `execute` (its description, its parameters as the input schema), whose
 * call parks the prompt until the client's output comes (writeStreamText
 * and writeUIMessageStream do that; modelMessagesOf gives the model the
 * output as the call's tool-result when the prompt resumes). `tools` is
 * returned as it is when the prompt declares none. A declared tool named
 * as one of `tools` (the model could not tell them apart) is a WorkerError
 * naming it, as is a declaration declaredTools refuses: thrown from the
 * handler, before the model runs, it fails the reply.
 *
 * ```ts
 * const result = streamText({ model, messages: modelMessagesOf(job), tools: withDeclaredTools(job, tools), abortSignal: job.signal });
 * await writeStreamText(job, result);
 * ```
 */
export function withDeclaredTools<TOOLS extends ToolSet>(job: Pick<Job, "modelConfig">, tools?: TOOLS): TOOLS & ToolSet {
  const decls = declaredTools(job);
  const own = (tools ?? {}) as TOOLS;
  if (decls.length === 0) return own;
  const out: ToolSet = { ...own };
  for (const d of decls) {
    if (Object.hasOwn(own, d.name)) {
      throw refuse(`the prompt declares a client tool "${d.name}", but this worker has a tool of that name: rename the declared tool`);
    }
    // No execute: a client tool, run by the client.
    out[d.name] = tool({
      ...(d.description !== undefined ? { description: d.description } : {}),
      inputSchema: jsonSchema(d.parameters ?? { type: "object", properties: {} }),
    });
  }
  return out as TOOLS & ToolSet;
}

function refuse(message: string): WorkerError {
  return new WorkerError("invalid_argument", message);
}
