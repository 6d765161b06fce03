// The AI SDK adapter against real PostgreSQL, with the AI SDK's own mock
// model (ai/test): streamText's stream and its UI message stream, a tool
// the AI SDK runs, a model error mid-reply, a cancel mid-reply, and the
// history handed back to the model.

import { jsonSchema, stepCountIs, streamText, tool, toUIMessageStream } from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { toModelMessages, writeStreamText, writeUIMessageStream } from "./ai-sdk.js";
import { Worker, type Job } from "./index.js";
import { blocks, send, settledAs, testDatabase, waitFor, type TestDatabase } from "./testing/db.js";
import { finish, reasoningParts, scriptedModel, sleep, textParts, toolCallParts } from "./testing/models.js";

let db: TestDatabase;
let worker: Worker | undefined;

beforeEach(async () => {
  db = await testDatabase();
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await db.drop();
});

async function serve(handler: (job: Job) => Promise<void>, slots = 1): Promise<void> {
  worker = new Worker({ connectionString: db.url, slots, pollIntervalMs: 200, handler });
  await worker.start();
}

const echo = tool({
  description: "Echoes its text.",
  inputSchema: jsonSchema<{ text: string }>({ type: "object", properties: { text: { type: "string" } }, required: ["text"] }),
  execute: async ({ text }) => text,
});

function toolRounds() {
  return scriptedModel([
    [...reasoningParts("r1", "The user ", "wants an echo."), ...textParts("t1", "Let me ", "echo that."), ...toolCallParts("c1", "echo", { text: "ping" }), finish("tool-calls")],
    [...textParts("t2", "It said: ", "ping."), finish()],
  ]);
}

const toolReply = [
  { type: "reasoning", status: "completed", content: "The user wants an echo." },
  { type: "text", status: "completed", content: "Let me echo that." },
  {
    type: "tool_use",
    status: "completed",
    content: '{"text":"ping"}',
    toolCall: { name: "echo", input: { text: "ping" }, status: "completed", output: "ping", error: null },
  },
  { type: "tool_result", status: "completed", content: "ping" },
  { type: "text", status: "completed", content: "It said: ping." },
];

describe("writeStreamText", () => {
  it("writes reasoning, text, a tool call the AI SDK runs and its result, and completes", async () => {
    const model = toolRounds();
    await serve(async (job) => {
      const result = streamText({ model, messages: toModelMessages(job.history), tools: { echo }, stopWhen: stepCountIs(5), abortSignal: job.signal });
      await writeStreamText(job, result);
    });
    const sent = await send(db.pool, "echo ping");
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(await blocks(db.pool, sent.messageId)).toMatchObject(toolReply);
    // The model's second round saw its tool call and the result.
    expect(JSON.stringify(model.doStreamCalls[1].prompt)).toContain('"tool-result"');
  });

  it("hands the conversation so far to the model, tool calls and results included", async () => {
    const model = toolRounds();
    await serve(async (job) => {
      await writeStreamText(job, streamText({ model, messages: toModelMessages(job.history), tools: { echo }, stopWhen: stepCountIs(5), abortSignal: job.signal }));
    });
    const first = await send(db.pool, "echo ping");
    await settledAs(db.pool, first.promptId, "completed");
    const second = await send(db.pool, "again", { conversationId: first.conversationId });
    await settledAs(db.pool, second.promptId, "completed");
    const prompt = model.doStreamCalls[2].prompt;
    expect(prompt.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant", "user"]);
    expect(prompt[1].content).toMatchObject([{ type: "text", text: "Let me echo that." }, { type: "tool-call", toolName: "echo", input: { text: "ping" } }]);
    expect(prompt[2].content).toMatchObject([{ type: "tool-result", toolName: "echo", output: { type: "text", value: "ping" } }]);
    expect(prompt[3].content).toMatchObject([{ type: "text", text: "It said: ping." }]);
    expect(prompt[4].content).toMatchObject([{ type: "text", text: "again" }]);
  });

  it("fails a tool call whose arguments break convo's rule for JSON, keeping them as text, and completes", async () => {
    // The AI SDK parses {"n": 1e400} into {n: Infinity} (JSON.stringify
    // would write null): the rule reads the text the model streamed.
    const args = '{"text": "ping", "n": 1e400}';
    const model = scriptedModel([
      [
        { type: "tool-input-start", id: "c1", toolName: "echo" },
        { type: "tool-input-delta", id: "c1", delta: args.slice(0, 20) },
        { type: "tool-input-delta", id: "c1", delta: args.slice(20) },
        { type: "tool-input-end", id: "c1" },
        { type: "tool-call", toolCallId: "c1", toolName: "echo", input: args },
        finish("tool-calls"),
      ],
      [...textParts("t2", "Done."), finish()],
    ]);
    await serve(async (job) => {
      await writeStreamText(job, streamText({ model, prompt: "x", tools: { echo }, stopWhen: stepCountIs(5), abortSignal: job.signal }));
    });
    const sent = await send(db.pool, "echo ping");
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    const why = "invalid arguments for tool echo: $.n: number 1e400 is outside the range of a 64-bit float (magnitude between 5e-324 and 1.7e308, or 0)";
    expect(await blocks(db.pool, sent.messageId)).toMatchObject([
      { type: "tool_use", content: args, toolCall: { name: "echo", input: args, status: "failed", error: why } },
      { type: "tool_result", content: `error: ${why}`, metadata: { isError: true } },
      { type: "text", content: "Done." },
    ]);
  });

  it("fails a tool call whose tool throws, and the model goes on", async () => {
    const broken = tool({
      inputSchema: jsonSchema<{ text: string }>({ type: "object", properties: { text: { type: "string" } } }),
      execute: async (): Promise<string> => {
        throw new Error("echo is down");
      },
    });
    const model = scriptedModel([
      [...toolCallParts("c1", "echo", { text: "ping" }), finish("tool-calls")],
      [...textParts("t2", "The tool failed."), finish()],
    ]);
    await serve(async (job) => {
      await writeStreamText(job, streamText({ model, prompt: "x", tools: { echo: broken }, stopWhen: stepCountIs(5), abortSignal: job.signal }));
    });
    const sent = await send(db.pool, "echo ping");
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(await blocks(db.pool, sent.messageId)).toMatchObject([
      { type: "tool_use", toolCall: { name: "echo", status: "failed", error: "echo is down" } },
      { type: "tool_result", content: "error: echo is down", metadata: { isError: true } },
      { type: "text", content: "The tool failed." },
    ]);
  });

  it("fails the prompt with the model's error text mid-reply, keeping the partial reply", async () => {
    const model = scriptedModel([[{ type: "text-start", id: "t1" }, { type: "text-delta", id: "t1", delta: "Half an ans" }, { type: "error", error: new Error("upstream overloaded") }]]);
    await serve(async (job) => {
      await writeStreamText(job, streamText({ model, prompt: "x", abortSignal: job.signal, onError: () => {} }));
    });
    const sent = await send(db.pool, "hi");
    expect(await settledAs(db.pool, sent.promptId, "completed", "failed")).toMatchObject({ status: "failed", error: "upstream overloaded" });
    expect(await blocks(db.pool, sent.messageId)).toMatchObject([{ type: "text", status: "completed", content: "Half an ans" }]);
  });

  it("stops the model at a cancel mid-reply, writes nothing more, and frees the slot", async () => {
    let modelStopped: unknown;
    const model = scriptedModel([
      async (c, signal) => {
        c.enqueue({ type: "text-start", id: "t1" });
        try {
          for (let i = 0; ; i++) {
            c.enqueue({ type: "text-delta", id: "t1", delta: `tick${i} ` });
            await sleep(20, signal);
          }
        } catch (err) {
          modelStopped = err;
          throw err;
        }
      },
    ]);
    await serve(async (job) => {
      if (job.history.at(-1)?.role === "user" && (job.history.at(-1) as { text: string }).text === "quick") {
        job.reply.text("quick answer");
        return;
      }
      await writeStreamText(job, streamText({ model, prompt: "x", abortSignal: job.signal, onError: () => {} }));
    });
    const sent = await send(db.pool, "long");
    await waitFor("the reply's first words", async () => (await blocks(db.pool, sent.messageId))[0]?.content.includes("tick2"));
    await db.pool.query("SELECT convo.cancel_prompt($1)", [sent.promptId]);
    await settledAs(db.pool, sent.promptId, "cancelled");
    await waitFor("the model to be aborted", () => modelStopped !== undefined);
    const count = async () => Number((await db.pool.query("SELECT count(*) FROM convo.events WHERE prompt_id = $1", [sent.promptId])).rows[0].count);
    const before = await count();
    const quick = await send(db.pool, "quick");
    expect((await settledAs(db.pool, quick.promptId, "completed", "failed")).status).toBe("completed");
    expect(await count()).toBe(before);
  });

  it("writes a structured answer as a structured block", async () => {
    const model = scriptedModel([[...textParts("t1", '{"answer": ', "42}"), finish()]]);
    await serve(async (job) => {
      await writeStreamText(job, streamText({ model, prompt: "x", abortSignal: job.signal }), { textAs: "structured" });
    });
    const sent = await send(db.pool, "hi");
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(await blocks(db.pool, sent.messageId)).toMatchObject([{ type: "structured", content: '{"answer": 42}' }]);
  });
});

describe("writeUIMessageStream", () => {
  it("writes a UI message stream as writeStreamText writes the stream", async () => {
    const model = toolRounds();
    await serve(async (job) => {
      const result = streamText({ model, messages: toModelMessages(job.history), tools: { echo }, stopWhen: stepCountIs(5), abortSignal: job.signal });
      await writeUIMessageStream(job, toUIMessageStream({ stream: result.stream }));
    });
    const sent = await send(db.pool, "echo ping");
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(await blocks(db.pool, sent.messageId)).toMatchObject(toolReply);
  });

  it("fails the prompt with an error chunk's text", async () => {
    const model = scriptedModel([[...textParts("t1", "Some text"), { type: "error", error: new Error("rate limited") }]]);
    await serve(async (job) => {
      const result = streamText({ model, prompt: "x", abortSignal: job.signal, onError: () => {} });
      await writeUIMessageStream(job, toUIMessageStream({ stream: result.stream, onError: (e) => (e instanceof Error ? e.message : String(e)) }));
    });
    const sent = await send(db.pool, "hi");
    expect(await settledAs(db.pool, sent.promptId, "completed", "failed")).toMatchObject({ status: "failed", error: "rate limited" });
    expect(await blocks(db.pool, sent.messageId)).toMatchObject([{ type: "text", content: "Some text" }]);
  });
});
