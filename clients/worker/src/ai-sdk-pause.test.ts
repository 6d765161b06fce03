// Pauses through the AI SDK adapter against real PostgreSQL, with the AI
// SDK's own mock model (ai/test), in both stream shapes (streamText's
// stream through writeStreamText, its UI message stream through
// writeUIMessageStream): a client tool (an AI SDK tool without execute)
// and a question (askUser) park the prompt on their own, as an approval
// does; the answer, given as the API's AnswerInput RPC gives it, queues it
// again; another Worker resumes it, and the model reads the answer as the
// tool's result and goes on in the same message. The approval through
// writeStreamText is pause.test.ts's.

import { jsonSchema, stepCountIs, streamText, tool, toUIMessageStream, type StreamTextResult, type ToolSet } from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { askUser, askUserName, clientToolMetadata, modelMessagesOf, questionMetadata, writeStreamText, writeUIMessageStream } from "./ai-sdk.js";
import { Worker, type Job, type Settled } from "./index.js";
import { blocks, send, settledAs, testDatabase, waitFor, type TestDatabase } from "./testing/db.js";
import { finish, scriptedModel, textParts, toolCallParts } from "./testing/models.js";
import { answerInput, assistantMessages, parkEvents, pauseState, waitingFor } from "./testing/pauses.js";

let db: TestDatabase;
const workers: Worker[] = [];

beforeEach(async () => {
  db = await testDatabase();
});

afterEach(async () => {
  for (const w of workers.splice(0)) await w.stop();
  await db.drop();
});

async function serve(workerId: string, handler: (job: Job) => Promise<void>, settled?: Settled[]): Promise<Worker> {
  const w = new Worker({ connectionString: db.url, workerId, slots: 1, pollIntervalMs: 200, handler, onSettled: (s) => settled?.push(s) });
  workers.push(w);
  await w.start();
  return w;
}

type Shape = "writeStreamText" | "writeUIMessageStream";

/** Writes a streamText result into the job's reply in the stream shape given. */
function writeAs(shape: Shape, job: Job, result: StreamTextResult<ToolSet, never, never>): Promise<void> {
  if (shape === "writeStreamText") return writeStreamText(job, result);
  return writeUIMessageStream(job, toUIMessageStream({ stream: result.stream, onError: (e) => (e instanceof Error ? e.message : String(e)) }));
}

/** A handler that runs streamText on the job's context (modelMessagesOf) and writes it in the shape given. */
function handler(shape: Shape, model: ReturnType<typeof scriptedModel>, tools: ToolSet) {
  return (job: Job) => {
    const result = streamText({ model, messages: modelMessagesOf(job), tools, stopWhen: stepCountIs(5), abortSignal: job.signal, onError: () => {} });
    return writeAs(shape, job, result as unknown as StreamTextResult<ToolSet, never, never>);
  };
}

const textInput = jsonSchema<{ text: string }>({ type: "object", properties: { text: { type: "string" } }, required: ["text"] });

/** A kind of pause: the tool that waits, what its call asks, the answer, and what the call's result is then. */
interface PauseCase {
  kind: "approval" | "client_tool" | "question";
  /** The tool set of a run, and the runs of the tool the worker executes. */
  tools(): { tools: ToolSet; runs: string[] };
  call: { name: string; input: Record<string, unknown> };
  request: Record<string, unknown>;
  answer: Record<string, unknown>;
  output: string;
  /** The tool's runs on the resuming worker. */
  runs: string[];
}

const cases: PauseCase[] = [
  {
    kind: "approval",
    tools() {
      const runs: string[] = [];
      const guarded = tool({
        description: "Echoes its text, once the user approves.",
        inputSchema: textInput,
        needsApproval: true,
        execute: async ({ text }) => {
          runs.push(text);
          return text;
        },
      });
      return { tools: { guarded_echo: guarded }, runs };
    },
    call: { name: "guarded_echo", input: { text: "ping" } },
    request: {},
    answer: { approved: true },
    output: "ping",
    runs: ["ping"],
  },
  {
    kind: "client_tool",
    tools() {
      // No execute: the browser runs it.
      const location = tool({
        description: "The user's location, from the browser.",
        inputSchema: jsonSchema<{ precision: string }>({ type: "object", properties: { precision: { type: "string" } }, required: ["precision"] }),
      });
      return { tools: { get_location: location }, runs: [] };
    },
    call: { name: "get_location", input: { precision: "city" } },
    request: {},
    answer: { output: '{"city":"Paris"}' },
    output: '{"city":"Paris"}',
    runs: [],
  },
  {
    kind: "question",
    tools: () => ({ tools: { [askUserName]: askUser() }, runs: [] }),
    call: { name: askUserName, input: { question: "Red or blue?", choices: ["red", "blue"] } },
    request: { question: "Red or blue?", choices: ["red", "blue"] },
    answer: { answer: "blue" },
    output: "blue",
    runs: [],
  },
];

/** Round 0 makes the call; round 1 answers after it. A model that resumes the prompt starts at round 1. */
function pausingModel(c: PauseCase, from = 0) {
  return scriptedModel(
    [
      [...textParts("t1", "Let me check."), ...toolCallParts("c1", c.call.name, c.call.input), finish("tool-calls")],
      [...textParts("t2", "Done."), finish()],
    ].slice(from),
  );
}

/** The tool-result the model was given for a call of toolName, from the prompt of one of its calls. */
function toolResultSeen(prompt: Array<{ role: string; content: unknown }>, toolName: string) {
  for (const m of prompt) {
    if (m.role !== "tool" || !Array.isArray(m.content)) continue;
    const part = m.content.find((p: { type: string; toolName?: string }) => p.type === "tool-result" && p.toolName === toolName);
    if (part) return part as { output: { type: string; value: unknown } };
  }
  return undefined;
}

for (const shape of ["writeStreamText", "writeUIMessageStream"] as const) {
  describe(`pauses through ${shape}`, () => {
    for (const c of cases) {
      if (shape === "writeStreamText" && c.kind === "approval") continue; // pause.test.ts

      it(`${c.kind}: parks the prompt, and the answer resumes the reply in the same message`, async () => {
        // The first worker runs the model until the call waits.
        const settled: Settled[] = [];
        const first = c.tools();
        const w1 = await serve("w1", handler(shape, pausingModel(c), first.tools), settled);
        const sent = await send(db.pool, "go");
        const state = await waitingFor(db.pool, sent.promptId);
        await waitFor("w1 to settle the prompt as waiting", () => settled.find((s) => s.promptId === sent.promptId));
        expect(settled).toMatchObject([{ promptId: sent.promptId, outcome: "waiting" }]);
        expect(w1.inFlight).toBe(0);
        expect(state).toMatchObject({ status: "queued", waiting: true, worker: null, lease_expires_at: null });
        expect(state.requests).toEqual([
          { kind: c.kind, status: "pending", toolCallId: expect.any(String), request: c.request, callStatus: "started", tool: c.call.name },
        ]);
        expect(first.runs).toEqual([]);
        // The call, its request, the end of its block and the park were
        // one transaction: no answer could come before the prompt was parked.
        const events = await parkEvents(db.pool, sent.conversationId, sent.messageId);
        expect(events.map((e) => e.kind)).toEqual(["toolCallStarted", "inputRequested", "blockEnd", "promptWaiting"]);
        expect(new Set(events.map((e) => e.tx)).size).toBe(1);
        expect(events[1].payload).toMatchObject({ inputRequest: { kind: c.kind, status: "pending", toolCallId: state.requests![0].toolCallId } });
        expect(await blocks(db.pool, sent.messageId)).toMatchObject([
          { type: "text", status: "completed", content: "Let me check." },
          { type: "tool_use", status: "completed", toolCall: { name: c.call.name, input: c.call.input, status: "started" } },
        ]);
        await w1.stop();

        // The user answers through the API; the prompt is claimable again.
        const answered = await answerInput(db.pool, state.requests![0].toolCallId, c.answer);
        expect(answered).toMatchObject({ kind: c.kind, status: "answered", answer: c.answer });
        expect(await pauseState(db.pool, sent.promptId)).toMatchObject({ status: "queued", waiting: false });

        // Another worker resumes it: the model reads the answer as the
        // tool's result, and its reply goes on in the same message.
        const model = pausingModel(c, 1);
        const second = c.tools();
        const jobs: Job[] = [];
        const handle = handler(shape, model, second.tools);
        await serve("w2", (job) => {
          jobs.push(job);
          return handle(job);
        });
        expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
        expect(jobs.map((j) => j.resumed)).toEqual([true]);
        expect(second.runs).toEqual(c.runs);
        expect(toolResultSeen(model.doStreamCalls[0].prompt, c.call.name)?.output).toEqual({ type: "text", value: c.output });
        expect(JSON.stringify(model.doStreamCalls[0].prompt)).toContain("Let me check.");
        expect(await assistantMessages(db.pool, sent.conversationId)).toEqual([sent.messageId]);
        expect(await blocks(db.pool, sent.messageId)).toMatchObject([
          { type: "text", status: "completed", content: "Let me check." },
          { type: "tool_use", status: "completed", toolCall: { name: c.call.name, input: c.call.input, status: "completed", output: c.output } },
          { type: "tool_result", status: "completed", content: c.output, metadata: { tool: c.call.name, inputKind: c.kind, callId: "c1", toolCallId: state.requests![0].toolCallId } },
          { type: "text", status: "completed", content: "Done." },
        ]);
        expect(await pauseState(db.pool, sent.promptId)).toMatchObject({ requests: [{ status: "answered", callStatus: "completed" }] });
      });
    }

    it("a step with a tool the AI SDK runs and a client tool: the first completes, the second waits with its output schema", async () => {
      const runs: string[] = [];
      const tools = {
        echo: tool({
          description: "Echoes its text.",
          inputSchema: textInput,
          execute: async ({ text }) => {
            runs.push(text);
            return text;
          },
        }),
        get_location: tool({
          description: "The user's location, from the browser.",
          inputSchema: jsonSchema<{ precision: string }>({ type: "object", properties: { precision: { type: "string" } } }),
          metadata: clientToolMetadata({ type: "object" }),
        }),
      };
      const model = scriptedModel([
        [...toolCallParts("c1", "echo", { text: "ping" }), ...toolCallParts("c2", "get_location", { precision: "city" }), finish("tool-calls")],
        [...textParts("t2", "You are in Paris."), finish()],
      ]);
      await serve("w1", handler(shape, model, tools));
      const sent = await send(db.pool, "where am I?");
      const state = await waitingFor(db.pool, sent.promptId);
      expect(runs).toEqual(["ping"]);
      expect(state.requests).toMatchObject([{ kind: "client_tool", tool: "get_location", request: { outputSchema: { type: "object" } }, callStatus: "started" }]);
      // Both calls' blocks streamed before the AI SDK ran echo.
      expect(await blocks(db.pool, sent.messageId)).toMatchObject([
        { type: "tool_use", toolCall: { name: "echo", status: "completed", output: "ping" } },
        { type: "tool_use", toolCall: { name: "get_location", status: "started" } },
        { type: "tool_result", content: "ping", metadata: { tool: "echo" } },
      ]);
      // The schema's type is held against the answer.
      await expect(answerInput(db.pool, state.requests![0].toolCallId, { output: "42" })).rejects.toMatchObject({ code: "CV003" });
      await answerInput(db.pool, state.requests![0].toolCallId, { output: '{"city":"Paris"}' });
      expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
      expect(runs).toEqual(["ping"]);
      expect(toolResultSeen(model.doStreamCalls[1].prompt, "echo")?.output).toEqual({ type: "text", value: "ping" });
      expect(toolResultSeen(model.doStreamCalls[1].prompt, "get_location")?.output).toEqual({ type: "text", value: '{"city":"Paris"}' });
      expect(await blocks(db.pool, sent.messageId)).toMatchObject([
        { type: "tool_use", toolCall: { name: "echo", status: "completed" } },
        { type: "tool_use", toolCall: { name: "get_location", status: "completed", output: '{"city":"Paris"}' } },
        { type: "tool_result", content: "ping", metadata: { tool: "echo" } },
        { type: "tool_result", content: '{"city":"Paris"}', metadata: { tool: "get_location", inputKind: "client_tool", callId: "c2" } },
        { type: "text", content: "You are in Paris." },
      ]);
    });

    it("a model error after the step's calls, before the step ends: each call the model made is recorded and fails with the prompt, none waits", async () => {
      // A tool the AI SDK runs, which finishes only when the test lets it:
      // its call has no result when the model's error comes.
      let release!: () => void;
      const gate = new Promise<string>((resolve) => (release = () => resolve("late")));
      const tools = {
        ...cases[0].tools().tools,
        ...cases[1].tools().tools,
        ...cases[2].tools().tools,
        slow_echo: tool({ description: "Echoes its text, slowly.", inputSchema: textInput, execute: () => gate }),
      };
      const model = scriptedModel([
        [
          ...textParts("t1", "Let me check."),
          ...toolCallParts("c1", "guarded_echo", { text: "ping" }),
          ...toolCallParts("c2", "get_location", { precision: "city" }),
          ...toolCallParts("c3", askUserName, { question: "Red or blue?" }),
          ...toolCallParts("c4", "slow_echo", { text: "pong" }),
          { type: "error", error: new Error("upstream overloaded") },
        ],
      ]);
      try {
        await serve("w1", handler(shape, model, tools));
        const sent = await send(db.pool, "go");
        expect(await settledAs(db.pool, sent.promptId, "completed", "failed")).toMatchObject({ status: "failed", error: "upstream overloaded" });
        expect(await pauseState(db.pool, sent.promptId)).toMatchObject({ waiting: false, requests: null });
        const failed = (name: string) => ({ type: "tool_use", status: "completed", toolCall: { name, status: "failed", error: "prompt failed before the tool call finished" } });
        expect(await blocks(db.pool, sent.messageId)).toMatchObject([
          { type: "text", content: "Let me check." },
          failed("guarded_echo"),
          failed("get_location"),
          failed(askUserName),
          failed("slow_echo"),
        ]);
      } finally {
        release();
      }
    });
  });
}

describe("pauses through the AI SDK adapter, answers and mistakes", () => {
  it("a client tool's error fails its call, and the model reads the error", async () => {
    const tools = { get_location: tool({ inputSchema: jsonSchema<{ precision: string }>({ type: "object", properties: { precision: { type: "string" } } }) }) };
    const c = cases[1];
    const w1 = await serve("w1", handler("writeStreamText", pausingModel(c), tools));
    const sent = await send(db.pool, "where am I?");
    const state = await waitingFor(db.pool, sent.promptId);
    await w1.stop();
    await answerInput(db.pool, state.requests![0].toolCallId, { error: "the user blocked location access" });
    const model = pausingModel(c, 1);
    await serve("w2", handler("writeStreamText", model, tools));
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(toolResultSeen(model.doStreamCalls[0].prompt, "get_location")?.output).toEqual({ type: "error-text", value: "the user blocked location access" });
    expect(await blocks(db.pool, sent.messageId)).toMatchObject([
      { type: "text", content: "Let me check." },
      { type: "tool_use", toolCall: { name: "get_location", status: "failed", error: "the user blocked location access" } },
      { type: "tool_result", content: "error: the user blocked location access", metadata: { isError: true, inputKind: "client_tool" } },
      { type: "text", content: "Done." },
    ]);
  });

  it("a question tool whose input is no question fails its call, naming the field, and the prompt does not wait", async () => {
    // A question tool of the handler's own, whose schema lets the model
    // leave the question out.
    const pick = tool({
      description: "Asks the user to pick.",
      inputSchema: jsonSchema<{ prompt: string }>({ type: "object", properties: { prompt: { type: "string" } } }),
      metadata: questionMetadata,
    });
    const model = scriptedModel([[...toolCallParts("c1", "pick", { prompt: "Red or blue?" }), finish("tool-calls")]]);
    await serve("w1", handler("writeStreamText", model, { pick }));
    const sent = await send(db.pool, "ask me");
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(await pauseState(db.pool, sent.promptId)).toMatchObject({ waiting: false, requests: null });
    expect(await blocks(db.pool, sent.messageId)).toMatchObject([
      { type: "tool_use", toolCall: { name: "pick", status: "failed", error: "pick: input.question must be a text that shows something" } },
      { type: "tool_result", content: "error: pick: input.question must be a text that shows something", metadata: { isError: true } },
    ]);
  });

  it("a tool's convo metadata the adapter cannot read fails the prompt by name, recording nothing of the call", async () => {
    const pick = tool({ inputSchema: textInput, metadata: { convo: { input: "questoin" } } });
    const model = scriptedModel([[...textParts("t1", "Let me ask."), ...toolCallParts("c1", "pick", { text: "Red or blue?" }), finish("tool-calls")]]);
    await serve("w1", handler("writeStreamText", model, { pick }));
    const sent = await send(db.pool, "ask me");
    expect(await settledAs(db.pool, sent.promptId, "completed", "failed")).toMatchObject({
      status: "failed",
      error: 'tool pick: metadata.convo.input must be "question" or "client_tool", got "questoin"',
    });
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM convo.tool_calls WHERE prompt_id = $1", [sent.promptId]);
    expect(rows[0].n).toBe(0);
    expect(await pauseState(db.pool, sent.promptId)).toMatchObject({ waiting: false, requests: null });
  });
});
