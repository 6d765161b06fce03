// OpenTelemetry through @opentelemetry/api (an optional peer): with a
// tracer provider registered, each prompt's span continues the trace
// context the prompt keeps in PostgreSQL (convo.prompt_trace), and the
// handler sees that context as job.traceparent / job.tracestate.

import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import type pg from "pg";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { Worker, type Job } from "./index.js";
import { send, settledAs, testDatabase, waitFor, type Sent, type TestDatabase } from "./testing/db.js";

const exporter = new InMemorySpanExporter();
let db: TestDatabase;
const workers: Worker[] = [];

beforeAll(() => {
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
});

afterAll(() => {
  trace.disable();
});

beforeEach(async () => {
  exporter.reset();
  db = await testDatabase();
});

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
  await db.drop();
});

/** Sends text as a request traced with traceContext would: convo.send_message keeps it with the prompt. */
async function sendTraced(pool: pg.Pool, text: string, traceContext: Record<string, string>): Promise<Sent> {
  const c = await pool.connect();
  try {
    await c.query("BEGIN");
    await c.query("SELECT set_config('convo.trace_context', $1, true)", [JSON.stringify(traceContext)]);
    const { rows } = await c.query(
      `SELECT conversation_id::text, assistant_message_ids[1]::text AS message_id, prompt_ids[1]::text AS prompt_id
         FROM convo.send_message('local', NULL, $1, '[{}]'::jsonb)`,
      [text],
    );
    await c.query("COMMIT");
    return { conversationId: rows[0].conversation_id, promptId: rows[0].prompt_id, messageId: rows[0].message_id };
  } finally {
    c.release();
  }
}

function promptSpans(promptId: string) {
  return exporter.getFinishedSpans().filter((s) => s.name === "convo.prompt" && s.attributes["convo.prompt.id"] === promptId);
}

describe("OpenTelemetry", () => {
  it("continues the prompt's stored trace context as the parent of its span", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const parentId = "00f067aa0ba902b7";
    const traceparent = `00-${traceId}-${parentId}-01`;
    let seen: Job | undefined;
    const w = new Worker({
      connectionString: db.url,
      leaseSeconds: 30,
      pollIntervalMs: 200,
      handler: async (job) => {
        seen = job;
        job.reply.text("hi");
      },
    });
    workers.push(w);
    await w.start();
    const sent = await sendTraced(db.pool, "traced", { traceparent, tracestate: "vendor=x" });
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(seen!.traceparent).toBe(traceparent);
    expect(seen!.tracestate).toBe("vendor=x");
    await waitFor("the prompt's span", () => promptSpans(sent.promptId).length === 1);
    const [span] = promptSpans(sent.promptId);
    expect(span.spanContext().traceId).toBe(traceId);
    expect(span.parentSpanContext?.spanId).toBe(parentId);
    expect(span.parentSpanContext?.isRemote).toBe(true);
    expect(span.spanContext().traceState?.get("vendor")).toBe("x");
    expect(span.kind).toBe(SpanKind.CONSUMER);
    expect(span.attributes).toMatchObject({
      "convo.prompt.id": sent.promptId,
      "convo.message.id": sent.messageId,
      "gen_ai.conversation.id": sent.conversationId,
      "convo.worker.name": w.workerId,
      "convo.prompt.attempt": 1,
      "convo.prompt.resumed": false,
      "convo.prompt.outcome": "completed",
    });
    expect(span.attributes["convo.prompt.queued_seconds"]).toBeGreaterThanOrEqual(0);
    expect(span.events.map((e) => e.name)).toEqual(["claimed", "completed"]);
  });

  it("starts a trace of its own for a prompt sent without one, with an error status when it fails", async () => {
    let seen: Job | undefined;
    const w = new Worker({
      connectionString: db.url,
      leaseSeconds: 30,
      pollIntervalMs: 200,
      handler: async (job) => {
        seen = job;
        throw new Error("the model broke");
      },
    });
    workers.push(w);
    await w.start();
    const sent = await send(db.pool, "untraced");
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("failed");
    expect(seen!.traceparent).toBeUndefined();
    expect(seen!.tracestate).toBeUndefined();
    await waitFor("the prompt's span", () => promptSpans(sent.promptId).length === 1);
    const [span] = promptSpans(sent.promptId);
    expect(span.parentSpanContext).toBeUndefined();
    expect(span.attributes["convo.prompt.outcome"]).toBe("failed");
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: "the model broke" });
  });
});
