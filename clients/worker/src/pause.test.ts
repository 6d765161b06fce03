// Pauses against real PostgreSQL: an AI SDK tool with needsApproval parks
// the prompt (approval request, wait_prompt, slot freed); the user's
// answer queues it again and another Worker resumes it, the AI SDK running
// the approved tool or reporting the denial, and the reply goes on in the
// same message. Also: a cancel while it waits, a question answered through
// the core API, and bad requests refused by name.

import { jsonSchema, stepCountIs, streamText, tool } from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { modelMessagesOf, writeStreamText } from "./ai-sdk.js";
import { Worker, isWorkerError, type Job, type Settled } from "./index.js";
import { blocks, send, settledAs, testDatabase, waitFor, type TestDatabase } from "./testing/db.js";
import { finish, scriptedModel, textParts, toolCallParts } from "./testing/models.js";
import { parkEvents, pauseState, waitingFor } from "./testing/pauses.js";

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

/** A tool that needs approval, counting its runs. */
function guarded() {
  const runs: string[] = [];
  const t = tool({
    description: "Echoes its text, once the user approves.",
    inputSchema: jsonSchema<{ text: string }>({ type: "object", properties: { text: { type: "string" } }, required: ["text"] }),
    needsApproval: true,
    execute: async ({ text }) => {
      runs.push(text);
      return text;
    },
  });
  return { tool: t, runs };
}

/** Round 0 asks for the guarded call; round 1 answers after it. A model that resumes the prompt starts at round 1. */
function pausingModel(from = 0) {
  return scriptedModel(
    [
      [...textParts("t1", "Let me check."), ...toolCallParts("c1", "guarded_echo", { text: "ping" }), finish("tool-calls")],
      [...textParts("t2", "Done."), finish()],
    ].slice(from),
  );
}

function aiSdkHandler(model: ReturnType<typeof pausingModel>, tools: Record<string, ReturnType<typeof guarded>["tool"]>) {
  return async (job: Job) => {
    const result = streamText({ model, messages: modelMessagesOf(job), tools, stopWhen: stepCountIs(5), abortSignal: job.signal, onError: () => {} });
    await writeStreamText(job, result);
  };
}

/** Runs the pausing model on worker w1 until the prompt waits, and stops w1. */
async function parkOnFirstWorker() {
  const model = pausingModel();
  const first = guarded();
  const settled: Settled[] = [];
  const w1 = await serve("w1", aiSdkHandler(model, { guarded_echo: first.tool }), settled);
  const sent = await send(db.pool, "echo ping, carefully");
  const state = await waitingFor(db.pool, sent.promptId);
  await waitFor("w1 to settle the prompt as waiting", () => settled.find((s) => s.promptId === sent.promptId));
  expect(settled).toMatchObject([{ promptId: sent.promptId, outcome: "waiting" }]);
  expect(w1.inFlight).toBe(0);
  await w1.stop();
  return { sent, state, model, firstRuns: first.runs };
}

describe("pauses with the AI SDK (needsApproval)", () => {
  it("parks the prompt on an approval request, holding no worker, lease or slot", async () => {
    const { sent, state, firstRuns } = await parkOnFirstWorker();
    expect(state).toMatchObject({ status: "queued", waiting: true, worker: null, lease_expires_at: null });
    expect(state.requests).toMatchObject([{ kind: "approval", status: "pending", callStatus: "started" }]);
    expect(firstRuns).toEqual([]);
    // The call, its request, the end of its block and the park were one
    // transaction: no answer could come before the prompt was parked.
    const rows = await parkEvents(db.pool, sent.conversationId, sent.messageId);
    expect(rows.map((r) => r.kind)).toEqual(["toolCallStarted", "inputRequested", "blockEnd", "promptWaiting"]);
    expect(new Set(rows.map((r) => r.tx)).size).toBe(1);
    expect(await blocks(db.pool, sent.messageId)).toMatchObject([
      { type: "text", status: "completed", content: "Let me check." },
      { type: "tool_use", status: "completed", content: '{"text":"ping"}', toolCall: { name: "guarded_echo", input: { text: "ping" }, status: "started" } },
    ]);
  });

  it("approved: another worker resumes it, the AI SDK runs the tool, and the reply goes on in the same message", async () => {
    const { sent, state } = await parkOnFirstWorker();
    await db.pool.query(`SELECT convo.answer_input('local', $1, '{"approved": true}')`, [state.requests![0].toolCallId]);
    const model = pausingModel(1);
    const second = guarded();
    const jobs: Job[] = [];
    const handle = aiSdkHandler(model, { guarded_echo: second.tool });
    await serve("w2", async (job) => {
      jobs.push(job);
      await handle(job);
    });
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(jobs[0]).toMatchObject({ resumed: true, inputs: [{ kind: "approval", status: "answered", open: true, approved: true }] });
    expect(second.runs).toEqual(["ping"]);
    expect(await blocks(db.pool, sent.messageId)).toMatchObject([
      { type: "text", content: "Let me check." },
      { type: "tool_use", toolCall: { name: "guarded_echo", status: "completed", output: "ping" } },
      { type: "tool_result", status: "completed", content: "ping", metadata: { tool: "guarded_echo", inputKind: "approval", callId: "c1" } },
      { type: "text", status: "completed", content: "Done." },
    ]);
    // The model's next round saw its earlier turn and the tool's result.
    const seen = JSON.stringify(model.doStreamCalls[0].prompt);
    expect(seen).toContain("Let me check.");
    expect(seen).toMatch(/"tool-result".*"ping"/);
  });

  it("denied: the call fails with the user's reason, the tool never runs, and the model is told", async () => {
    const { sent, state } = await parkOnFirstWorker();
    await db.pool.query(`SELECT convo.answer_input('local', $1, '{"approved": false, "reason": "not now"}')`, [state.requests![0].toolCallId]);
    const model = pausingModel(1);
    const second = guarded();
    await serve("w2", aiSdkHandler(model, { guarded_echo: second.tool }));
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(second.runs).toEqual([]);
    expect(await blocks(db.pool, sent.messageId)).toMatchObject([
      { type: "text", content: "Let me check." },
      { type: "tool_use", toolCall: { name: "guarded_echo", status: "failed", error: "denied by the user: not now" } },
      { type: "tool_result", content: "error: denied by the user: not now", metadata: { isError: true, inputKind: "approval" } },
      { type: "text", content: "Done." },
    ]);
    expect(JSON.stringify(model.doStreamCalls[0].prompt)).toContain("not now");
  });

  it("cancelled while it waits: the call fails, the request is cancelled, and no worker claims it again", async () => {
    const settled: Settled[] = [];
    const model = pausingModel();
    const g = guarded();
    await serve("w1", aiSdkHandler(model, { guarded_echo: g.tool }), settled);
    const sent = await send(db.pool, "echo ping, carefully");
    await waitingFor(db.pool, sent.promptId);
    await db.pool.query("SELECT convo.cancel_prompt($1)", [sent.promptId]);
    await settledAs(db.pool, sent.promptId, "cancelled");
    const state = await pauseState(db.pool, sent.promptId);
    expect(state.requests).toMatchObject([{ status: "cancelled", callStatus: "failed" }]);
    // The worker still serves: another prompt completes on its one slot.
    const next = await send(db.pool, "another");
    await settledAs(db.pool, next.promptId, "completed", "failed");
    await waitFor("the second prompt to settle", () => settled.some((s) => s.promptId === next.promptId));
    expect(settled.filter((s) => s.promptId === sent.promptId).map((s) => s.outcome)).toEqual(["waiting"]);
    expect(g.runs).toEqual([]);
  });
});

describe("pauses with the core API", () => {
  it("parks on a question and settles the answer on resume", async () => {
    const seen: Job[] = [];
    await serve("w1", async (job) => {
      seen.push(job);
      if (!job.resumed) {
        job.reply.text("Which one?");
        await job.reply.waitForInput([
          { call: { name: "ask_user", callId: "q1" }, input: { question: "Red or blue?" }, kind: "question", request: { question: "Red or blue?", choices: ["red", "blue"] } },
        ]);
        return;
      }
      const results = await Promise.all(job.inputs.filter((i) => i.open).map((i) => i.settle()));
      job.reply.text(`You chose ${results[0].text}.`);
    });
    const sent = await send(db.pool, "ask me");
    const state = await waitingFor(db.pool, sent.promptId);
    await db.pool.query(`SELECT convo.answer_input('local', $1, '{"answer": "blue"}')`, [state.requests![0].toolCallId]);
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(seen.map((j) => j.resumed)).toEqual([false, true]);
    expect(seen[1].replySoFar).toMatchObject([{ role: "assistant", text: "Which one?", toolCalls: [{ name: "ask_user", input: { question: "Red or blue?" } }] }]);
    expect(await blocks(db.pool, sent.messageId)).toMatchObject([
      { type: "text", content: "Which one?" },
      { type: "tool_use", toolCall: { name: "ask_user", status: "completed", output: "blue" } },
      { type: "tool_result", content: "blue", metadata: { inputKind: "question", callId: "q1" } },
      { type: "text", content: "You chose blue." },
    ]);
  });

  it("refuses a bad request by name and writes nothing of it", async () => {
    const errors: unknown[] = [];
    await serve("w1", async (job) => {
      for (const bad of [
        [],
        [{ call: { name: "x" }, input: {}, kind: "approve" }],
        [{ call: { name: "" }, input: {}, kind: "approval" }],
        [{ call: { name: "x" }, input: {}, kind: "approval", request: ["no"] }],
        [{ call: { name: "x" }, input: {}, kind: "approval", expiresAt: "tomorrow" }],
      ]) {
        try {
          await job.reply.waitForInput(bad as never);
        } catch (err) {
          errors.push(err);
        }
      }
      job.reply.text("fine");
    });
    const sent = await send(db.pool, "hi");
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(errors.map((e) => (isWorkerError(e, "invalid_argument") ? e.message : String(e)))).toEqual([
      "waitForInput: requests must be a non-empty array",
      'waitForInput: requests[0].kind must be one of approval, client_tool, question, got "approve"',
      "waitForInput: requests[0].call must be a StreamingToolCall or {name, callId?}",
      "waitForInput: requests[0].request must be a plain object",
      "waitForInput: requests[0].expiresAt must be a valid Date",
    ]);
    expect(await blocks(db.pool, sent.messageId)).toMatchObject([{ type: "text", content: "fine" }]);
  });
});
