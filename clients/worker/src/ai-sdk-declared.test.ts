// The client tools a prompt declares (its model configuration's `tools`,
// as an OpenAI Responses request's function tools are), through the AI SDK
// adapter against real PostgreSQL with the AI SDK's mock model: offered to
// the model beside the worker's own tools (withDeclaredTools), a call of
// one parks the prompt as a client tool's, and the client's output is the
// call's result when another worker resumes it; a declared name that is
// one of the worker's tools, or a declaration that is none, fails the
// reply naming it before the model runs.

import { jsonSchema, stepCountIs, streamText, tool, toUIMessageStream, type StreamTextResult, type ToolSet } from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { declaredTools, modelMessagesOf, withDeclaredTools, writeStreamText, writeUIMessageStream } from "./ai-sdk.js";
import { Worker, type Job } from "./index.js";
import { blocks, send, settledAs, testDatabase, type TestDatabase } from "./testing/db.js";
import { finish, scriptedModel, textParts, toolCallParts } from "./testing/models.js";
import { answerInput, pauseState, waitingFor } from "./testing/pauses.js";

let db: TestDatabase;
const workers: Worker[] = [];

beforeEach(async () => {
  db = await testDatabase();
});

afterEach(async () => {
  for (const w of workers.splice(0)) await w.stop();
  await db.drop();
});

async function serve(workerId: string, handler: (job: Job) => Promise<void>): Promise<Worker> {
  const w = new Worker({ connectionString: db.url, workerId, slots: 1, pollIntervalMs: 200, handler });
  workers.push(w);
  await w.start();
  return w;
}

type Shape = "writeStreamText" | "writeUIMessageStream";

/** A handler that offers the worker's tools and the prompt's declared ones, and writes the stream in the shape given. */
function handler(shape: Shape, model: ReturnType<typeof scriptedModel>, tools: ToolSet) {
  return (job: Job) => {
    const result = streamText({
      model,
      messages: modelMessagesOf(job),
      tools: withDeclaredTools(job, tools),
      stopWhen: stepCountIs(5),
      abortSignal: job.signal,
      onError: () => {},
    }) as unknown as StreamTextResult<ToolSet, never, never>;
    if (shape === "writeStreamText") return writeStreamText(job, result);
    return writeUIMessageStream(job, toUIMessageStream({ stream: result.stream, onError: (e) => (e instanceof Error ? e.message : String(e)) }));
  };
}

const runs: string[] = [];
const echo = tool({
  description: "Echoes its text.",
  inputSchema: jsonSchema<{ text: string }>({ type: "object", properties: { text: { type: "string" } }, required: ["text"] }),
  execute: async ({ text }) => {
    runs.push(text);
    return text;
  },
});

const weather = {
  name: "get_weather",
  description: "The weather in a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
};

/** The function tools a model call was offered, by name. */
function offered(model: ReturnType<typeof scriptedModel>, call: number) {
  const tools = (model.doStreamCalls[call].tools ?? []) as Array<{ type: string; name: string; description?: string; inputSchema?: unknown }>;
  return Object.fromEntries(tools.map((t) => [t.name, t]));
}

for (const shape of ["writeStreamText", "writeUIMessageStream"] as const) {
  describe(`declared client tools through ${shape}`, () => {
    it("are offered beside the worker's tools; a call parks the prompt, and the client's output is its result", async () => {
      const first = scriptedModel([[...textParts("t1", "Let me look."), ...toolCallParts("c1", "get_weather", { city: "Lima" }), finish("tool-calls")]]);
      const w1 = await serve("w1", handler(shape, first, { echo }));
      const sent = await send(db.pool, "weather in Lima?", { modelConfig: { tools: [weather] } });
      const state = await waitingFor(db.pool, sent.promptId);
      const tools = offered(first, 0);
      expect(Object.keys(tools).sort()).toEqual(["echo", "get_weather"]);
      expect(tools.get_weather).toMatchObject({ type: "function", description: weather.description, inputSchema: weather.parameters });
      expect(state.requests).toEqual([
        { kind: "client_tool", status: "pending", toolCallId: expect.any(String), request: {}, callStatus: "started", tool: "get_weather" },
      ]);
      await w1.stop();

      await answerInput(db.pool, state.requests![0].toolCallId, { output: "warm, 24 C" });
      const second = scriptedModel([[...textParts("t2", "It is warm."), finish()]]);
      await serve("w2", handler(shape, second, { echo }));
      expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
      const result = second.doStreamCalls[0].prompt
        .flatMap((m) => (m.role === "tool" ? m.content : []))
        .find((p) => p.type === "tool-result" && p.toolName === "get_weather");
      expect(result).toMatchObject({ output: { type: "text", value: "warm, 24 C" } });
      expect(Object.keys(offered(second, 0)).sort()).toEqual(["echo", "get_weather"]);
      expect(runs).toEqual([]);
      expect(await blocks(db.pool, sent.messageId)).toMatchObject([
        { type: "text", content: "Let me look." },
        { type: "tool_use", toolCall: { name: "get_weather", input: { city: "Lima" }, status: "completed", output: "warm, 24 C" } },
        { type: "tool_result", content: "warm, 24 C", metadata: { tool: "get_weather", inputKind: "client_tool" } },
        { type: "text", content: "It is warm." },
      ]);
    });
  });
}

describe("declared client tools refused", () => {
  const cases: Array<{ what: string; tools: unknown; error: string }> = [
    {
      what: "a declared tool named as one of the worker's",
      tools: [{ name: "echo" }],
      error: 'the prompt declares a client tool "echo", but this worker has a tool of that name: rename the declared tool',
    },
    { what: "a name declared twice", tools: [weather, weather], error: "the prompt's declared tool 1: tool get_weather is declared twice" },
    {
      what: "a name that is not one",
      tools: [{ name: "get weather" }],
      error: `the prompt's declared tool 0: tool name "get weather": want 1 to 64 letters, digits, _ or -`,
    },
    {
      what: "parameters that are not an object's schema",
      tools: [{ name: "get_weather", parameters: { type: "string" } }],
      error: `the prompt's declared tool 0: tool get_weather: parameters must be the schema of an object ("type": "object")`,
    },
    { what: "tools that are not a list", tools: { name: "get_weather" }, error: "the prompt's declared tools (modelConfig.tools) must be a list" },
  ];
  for (const c of cases) {
    it(`${c.what}: fails the reply naming it, before the model runs`, async () => {
      const model = scriptedModel([[...textParts("t1", "Hello."), finish()]]);
      await serve("w1", handler("writeStreamText", model, { echo }));
      const sent = await send(db.pool, "hi", { modelConfig: { tools: c.tools } });
      expect(await settledAs(db.pool, sent.promptId, "completed", "failed")).toMatchObject({ status: "failed", error: c.error });
      expect(model.doStreamCalls).toHaveLength(0);
      expect(await blocks(db.pool, sent.messageId)).toEqual([]);
      expect(await pauseState(db.pool, sent.promptId)).toMatchObject({ waiting: false, requests: null });
    });
  }

  it("no declared tools: the worker's tools as they are", () => {
    const own = { echo };
    expect(withDeclaredTools({ modelConfig: {} }, own)).toBe(own);
    expect(declaredTools({ modelConfig: { tools: [weather] } })).toEqual([weather]);
  });
});
