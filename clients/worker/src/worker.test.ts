// The runtime against real PostgreSQL: a reply written with the Reply API,
// bad settings, many replies in shared transactions, cancel, a lost lease,
// drain.

import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Worker, WorkerError, type Job, type WorkerOptions } from "./index.js";
import { blocks, expireLease, prompt, send, settledAs, testDatabase, waitFor, type TestDatabase } from "./testing/db.js";
import { sleep } from "./testing/models.js";

let db: TestDatabase;
const workers: Worker[] = [];

beforeEach(async () => {
  db = await testDatabase();
});

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
  await db.drop();
});

async function startWorker(opts: Partial<WorkerOptions> & Pick<WorkerOptions, "handler">): Promise<Worker> {
  const w = new Worker({ connectionString: db.url, leaseSeconds: 30, pollIntervalMs: 200, ...opts });
  workers.push(w);
  await w.start();
  return w;
}

describe("Worker", () => {
  it("writes text, reasoning, structured output and a tool call, then completes the prompt", async () => {
    let seen: Job | undefined;
    await startWorker({
      handler: async (job) => {
        seen = job;
        job.reply.reasoning("Let me ");
        job.reply.reasoning("think.");
        job.reply.text("Hello, ");
        job.reply.text("world.");
        const call = job.reply.toolCall("echo", { text: "hi" });
        call.progress("echoing… ");
        call.complete("hi");
        job.reply.structured('{"answer":');
        job.reply.structured(" 42}");
      },
    });
    const sent = await send(db.pool, "What is 6 times 7?", { modelConfig: { model: "small" } });
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(seen!.modelConfig).toEqual({ model: "small" });
    expect(seen!.attempts).toBe(1);
    expect(seen!.history).toEqual([{ role: "user", text: "What is 6 times 7?" }]);
    const got = await blocks(db.pool, sent.messageId);
    expect(got.map((b) => [b.type, b.status, b.content])).toEqual([
      ["reasoning", "completed", "Let me think."],
      ["text", "completed", "Hello, world."],
      ["tool_use", "completed", '{"text":"hi"}'],
      ["tool_result", "completed", "hi"],
      ["structured", "completed", '{"answer": 42}'],
    ]);
    expect(got[2].toolCall).toEqual({ name: "echo", input: { text: "hi" }, status: "completed", output: "echoing… hi", error: null });
    expect(got[3].metadata).toMatchObject({ tool: "echo", callId: expect.any(String), toolCallId: expect.any(String) });
  });

  it("fails the prompt with the handler's error, keeping the partial reply", async () => {
    await startWorker({
      handler: async (job) => {
        job.reply.text("partial");
        throw new Error("the model broke");
      },
    });
    const sent = await send(db.pool, "hi");
    const p = await settledAs(db.pool, sent.promptId, "completed", "failed");
    expect(p).toMatchObject({ status: "failed", error: "the model broke" });
    expect(await blocks(db.pool, sent.messageId)).toMatchObject([{ type: "text", status: "completed", content: "partial" }]);
  });

  it("fails a reply whose structured output is not JSON, saying so", async () => {
    await startWorker({ handler: async (job) => job.reply.structured('{"a": ') });
    const sent = await send(db.pool, "hi");
    const p = await settledAs(db.pool, sent.promptId, "completed", "failed");
    expect(p.status).toBe("failed");
    expect(p.error).toMatch(/^the structured output is not valid JSON/);
  });

  it("gives the handler the conversation's history", async () => {
    const histories: Job["history"][] = [];
    await startWorker({
      handler: async (job) => {
        histories.push(job.history);
        job.reply.text("Let me check.");
        job.reply.toolCall("echo", { text: "x" }).fail("no echo today");
        job.reply.text("It failed.");
      },
    });
    const first = await send(db.pool, "one");
    await settledAs(db.pool, first.promptId, "completed");
    const second = await send(db.pool, "two", { conversationId: first.conversationId });
    await settledAs(db.pool, second.promptId, "completed");
    const h = histories[1];
    expect(h.length).toBe(5);
    expect(h[0]).toEqual({ role: "user", text: "one" });
    expect(h[1]).toMatchObject({ role: "assistant", text: "Let me check.", toolCalls: [{ name: "echo", input: { text: "x" } }] });
    expect(h[2]).toMatchObject({ role: "tool", toolName: "echo", output: "error: no echo today", isError: true });
    expect(h[3]).toEqual({ role: "assistant", text: "It failed.", toolCalls: [] });
    expect(h[4]).toEqual({ role: "user", text: "two" });
  });

  it("refuses bad settings, naming the field", () => {
    const handler = async () => {};
    expect(() => new Worker({ handler } as WorkerOptions)).toThrow(/exactly one of pool .* and connectionString/);
    expect(() => new Worker({ connectionString: "postgres://x/y", handler, slots: 0 })).toThrow(/^slots must be a whole number from 1/);
    expect(() => new Worker({ connectionString: "postgres://x/y", handler, leaseSeconds: 4000 })).toThrow(/^leaseSeconds must/);
    expect(() => new Worker({ connectionString: "postgres://x/y", handler, slots: 2, reservedSlots: 3 })).toThrow(/^reservedSlots must/);
    expect(() => new Worker({ connectionString: "postgres://x/y", handler, workerId: " " })).toThrow(/^workerId must/);
    expect(() => new Worker({ connectionString: "postgres://x/y", handler: undefined as never })).toThrow(/^handler must be a function/);
  });

  it("writes many replies in shared transactions", async () => {
    const n = 12;
    await startWorker({
      slots: n,
      lanes: 1,
      batchIntervalMs: 30,
      handler: async (job) => {
        for (let i = 0; i < 10; i++) {
          job.reply.text(`word${i} `);
          await sleep(15);
        }
      },
    });
    const sent = await Promise.all(Array.from({ length: n }, (_, i) => send(db.pool, `hi ${i}`, { owner: `user${i}` })));
    for (const s of sent) expect((await settledAs(db.pool, s.promptId, "completed", "failed")).status).toBe("completed");
    for (const s of sent) {
      expect((await blocks(db.pool, s.messageId)).map((b) => b.content)).toEqual([Array.from({ length: 10 }, (_, i) => `word${i} `).join("")]);
    }
    // Events inserted by one transaction share its xmin.
    const { rows } = await db.pool.query(
      `SELECT max(n)::int AS most FROM (SELECT xmin::text, count(DISTINCT prompt_id) AS n FROM convo.events WHERE kind = 'blockDelta' GROUP BY 1) t`,
    );
    expect(rows[0].most).toBeGreaterThanOrEqual(2);
  });

  it("stops writing at a cancel, frees the slot, and writes nothing more", async () => {
    let stoppedWith: unknown;
    await startWorker({
      slots: 1,
      handler: async (job) => {
        if (job.history[0]?.role === "user" && job.history[0].text === "quick") {
          job.reply.text("done");
          return;
        }
        try {
          for (let i = 0; ; i++) {
            job.reply.text(`tick${i} `);
            await sleep(20, job.signal);
          }
        } catch (err) {
          stoppedWith = err;
          throw err;
        }
      },
    });
    const long = await send(db.pool, "long");
    await waitFor("the reply's first words", async () => (await blocks(db.pool, long.messageId))[0]?.content.includes("tick2"));
    await db.pool.query("SELECT convo.cancel_prompt($1)", [long.promptId]);
    expect((await settledAs(db.pool, long.promptId, "cancelled")).status).toBe("cancelled");
    await waitFor("the handler to stop", () => stoppedWith !== undefined);
    expect(stoppedWith).toBeInstanceOf(WorkerError);
    expect((stoppedWith as WorkerError).code).toBe("cancelled");
    const events = async () => Number((await db.pool.query("SELECT count(*) FROM convo.events WHERE prompt_id = $1", [long.promptId])).rows[0].count);
    const before = await events();
    // The only slot is free: the next prompt runs.
    const quick = await send(db.pool, "quick");
    expect((await settledAs(db.pool, quick.promptId, "completed", "failed")).status).toBe("completed");
    expect(await events()).toBe(before);
  });

  it("expireLease (of the lost-lease tests) fails the prompt under a batch in flight", async () => {
    // A batch that locked the conversation and not yet the prompt's row
    // (it then waits for the row behind expireLease's update) made
    // expire_leases, which skips a conversation locked by someone else,
    // leave the prompt running; the batch's next heartbeat extended it.
    const sent = await send(db.pool, "hold it");
    expect((await db.pool.query("SELECT * FROM convo.claim_prompts('holder', 30, 1)")).rowCount).toBe(1);
    await db.pool.query("SELECT convo.start_prompt($1)", [sent.promptId]);
    const batch = await db.pool.connect();
    try {
      await batch.query("BEGIN");
      // The first lock write_batch takes.
      await batch.query("SELECT 1 FROM convo.conversations WHERE id = $1 FOR NO KEY UPDATE", [sent.conversationId]);
      let done = false;
      const expiring = expireLease(db.pool, sent.promptId).finally(() => (done = true));
      expiring.catch(() => {});
      await waitFor("expireLease to wait for the batch's lock (or to return)", async () => {
        if (done) return true;
        const { rows } = await db.pool.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        );
        return rows[0].n > 0;
      });
      await batch.query("COMMIT");
      await expiring;
    } finally {
      batch.release();
    }
    const p = await prompt(db.pool, sent.promptId);
    expect(p.status).toBe("failed");
    expect(p.error).toMatch(/lease expired/);
  });

  it("stops a reply whose lease was lost, and goes on serving", async () => {
    let stoppedWith: unknown;
    await startWorker({
      slots: 1,
      leaseSeconds: 3,
      handler: async (job) => {
        if (job.history[0]?.role === "user" && job.history[0].text === "next") {
          job.reply.text("served");
          return;
        }
        try {
          for (let i = 0; ; i++) {
            job.reply.text(`tick${i} `);
            await sleep(50, job.signal);
          }
        } catch (err) {
          stoppedWith = err;
        }
      },
    });
    const sent = await send(db.pool, "hang on");
    await waitFor("the reply's first words", async () => (await blocks(db.pool, sent.messageId))[0]?.content.includes("tick1"));
    await expireLease(db.pool, sent.promptId);
    const p = await prompt(db.pool, sent.promptId);
    expect(p.status).toBe("failed");
    expect(p.error).toMatch(/lease expired/);
    await waitFor("the handler to stop", () => stoppedWith !== undefined);
    expect((stoppedWith as WorkerError).code).toBe("lease_lost");
    const next = await send(db.pool, "next");
    expect((await settledAs(db.pool, next.promptId, "completed", "failed")).status).toBe("completed");
    expect((await prompt(db.pool, sent.promptId)).error).toMatch(/lease expired/);
  });

  it("stops a reply another worker took over as a lost lease", async () => {
    let stoppedWith: unknown;
    await startWorker({
      slots: 1,
      handler: async (job) => {
        try {
          for (let i = 0; ; i++) {
            job.reply.text(`tick${i} `);
            await sleep(50, job.signal);
          }
        } catch (err) {
          stoppedWith = err;
        }
      },
    });
    const sent = await send(db.pool, "hang on");
    await waitFor("the reply's first words", async () => (await blocks(db.pool, sent.messageId))[0]?.content.includes("tick1"));
    // As if the lease had run out and another worker had claimed it:
    // write_batch refuses with "is held by other, not by <this worker>".
    await db.pool.query("UPDATE convo.prompts SET worker = 'another-worker' WHERE id = $1", [sent.promptId]);
    await waitFor("the handler to stop", () => stoppedWith !== undefined);
    expect((stoppedWith as WorkerError).code).toBe("lease_lost");
  });

  it("refuses metadata or a tool input that is not JSON at the call, failing that reply alone", async () => {
    // Both handlers write in the same tick, so their ops share a batch: a
    // value JSON cannot hold must fail its own reply, not the batch.
    let arrived = 0;
    let release!: () => void;
    const together = new Promise<void>((r) => (release = r));
    const thrown: unknown[] = [];
    await startWorker({
      slots: 3,
      lanes: 1,
      handler: async (job) => {
        if (++arrived === 3) release();
        await together;
        const text = job.history[0]?.role === "user" ? job.history[0].text : "";
        try {
          if (text === "bigint") job.reply.startBlock("note", { tokens: 10n });
          if (text === "deep") {
            let deep: unknown = "bottom";
            for (let i = 0; i < 70; i++) deep = { d: deep };
            job.reply.startBlock("note", { deep });
          }
          if (text === "circular") {
            const input: Record<string, unknown> = {};
            input.self = input;
            job.reply.startToolCall("echo").call(input);
          }
        } catch (err) {
          thrown.push(err);
          throw err;
        }
        job.reply.text(`fine: ${text}`);
      },
    });
    const [bigint, circular, deep, plain] = await Promise.all(
      ["bigint", "circular", "deep", "plain"].map((t, i) => send(db.pool, t, { owner: `user${i}` })),
    );
    expect(await settledAs(db.pool, plain.promptId, "completed", "failed")).toMatchObject({ status: "completed" });
    expect((await blocks(db.pool, plain.messageId)).map((b) => b.content)).toEqual(["fine: plain"]);
    const b = await settledAs(db.pool, bigint.promptId, "completed", "failed");
    expect(b.status).toBe("failed");
    expect(b.error).toMatch(/^startBlock: metadata must be JSON/);
    const c = await settledAs(db.pool, circular.promptId, "completed", "failed");
    expect(c.status).toBe("failed");
    expect(c.error).toMatch(/^toolCall: input must be JSON/);
    // convo's rule for accepted JSON (jsonlimit): nesting past 64 levels.
    const d = await settledAs(db.pool, deep.promptId, "completed", "failed");
    expect(d.status).toBe("failed");
    expect(d.error).toBe(`startBlock: metadata: $.deep${".d".repeat(63)}: nested deeper than 64 levels`);
    expect(thrown.map((e) => (e as WorkerError).code)).toEqual(["invalid_argument", "invalid_argument", "invalid_argument"]);
  });

  it("fails the prompt when the batch that completes it fails as a whole", async () => {
    // A statement timeout (not retried) on the batch that carries
    // complete_prompt, once: the prompt is still this worker's, so it must
    // be failed with the reason now, not left running until its lease ends.
    await db.pool.query(`
      CREATE SEQUENCE public.completions; -- nextval is not rolled back with the batch
      CREATE FUNCTION public.time_out_first_completion() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF nextval('public.completions') = 1 THEN
          RAISE EXCEPTION 'canceling statement due to statement timeout' USING ERRCODE = 'query_canceled';
        END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER time_out_first_completion BEFORE UPDATE OF status ON convo.prompts
        FOR EACH ROW WHEN (NEW.status = 'completed') EXECUTE FUNCTION public.time_out_first_completion();`);
    await startWorker({ slots: 1, leaseSeconds: 60, handler: async (job) => job.reply.text("all of it") });
    const sent = await send(db.pool, "hi");
    const p = await settledAs(db.pool, sent.promptId, "completed", "failed");
    expect(p.status).toBe("failed");
    expect(p.error).toContain("statement timeout");
    expect((await blocks(db.pool, sent.messageId)).map((b) => b.content)).toEqual(["all of it"]);
  });

  it("fails the prompt when write_batch refuses an op queued just before the handler threw", async () => {
    // The refused op and fail_prompt share a batch: write_batch leaves out
    // the prompt's ops from the refused one on, fail_prompt included. The
    // prompt is still this worker's, so it must be failed now, not left
    // running until its lease ends.
    await db.pool.query(`
      CREATE FUNCTION public.refuse_notes() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'notes are not taken here';
      END $$;
      CREATE TRIGGER refuse_notes BEFORE INSERT ON convo.blocks
        FOR EACH ROW WHEN (NEW.block_type = 'note') EXECUTE FUNCTION public.refuse_notes();`);
    await startWorker({
      slots: 1,
      leaseSeconds: 60,
      handler: async (job) => {
        job.reply.text("so far");
        await job.reply.flush();
        job.reply.startBlock("note");
        throw new Error("the model broke");
      },
    });
    const sent = await send(db.pool, "hi");
    const p = await settledAs(db.pool, sent.promptId, "completed", "failed");
    expect(p.status).toBe("failed");
    expect(p.error).toBe("the model broke"); // the handler's error, as the Go runtime fails it
    expect((await blocks(db.pool, sent.messageId)).map((b) => b.content)).toEqual(["so far"]);
  });

  it("drains: lets replies in flight finish, then fails the rest as shutting down", async () => {
    const w = await startWorker({
      slots: 2,
      handler: async (job) => {
        const text = job.history[0]?.role === "user" ? job.history[0].text : "";
        job.reply.text("started ");
        await sleep(text === "short" ? 300 : 60_000, job.signal);
        job.reply.text("finished");
      },
    });
    const short = await send(db.pool, "short", { owner: "a" });
    const long = await send(db.pool, "long", { owner: "b" });
    await waitFor("both replies to start", async () =>
      (await blocks(db.pool, short.messageId)).length > 0 && (await blocks(db.pool, long.messageId)).length > 0,
    );
    await w.drain(2000);
    expect(await prompt(db.pool, short.promptId)).toMatchObject({ status: "completed" });
    expect((await blocks(db.pool, short.messageId))[0].content).toBe("started finished");
    const p = await prompt(db.pool, long.promptId);
    expect(p.status).toBe("failed");
    expect(p.error).toContain("shutting down");
    // Nothing is claimed once drained.
    const after = await send(db.pool, "after");
    await sleep(500);
    expect((await prompt(db.pool, after.promptId)).status).toBe("queued");
  });

  it("drains when told to while it starts (a SIGTERM as the process starts): it stops what start() opened", async () => {
    const w = new Worker({ connectionString: db.url, pollIntervalMs: 200, handler: async (job) => job.reply.text("claimed") });
    workers.push(w);
    const started = w.start();
    const drained = w.drain(1000); // before start() has connected
    await started;
    await drained;
    // Its LISTEN connection is closed, not left behind listening.
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'`,
    );
    expect(rows[0].n).toBe(0);
    // And it claims nothing.
    const after = await send(db.pool, "after");
    await sleep(500);
    expect((await prompt(db.pool, after.promptId)).status).toBe("queued");
  });
});
