// The process lease against real PostgreSQL: one heartbeat per process
// keeps every reply it runs, whatever its batches do; a process whose
// heartbeats stop getting through loses them all; a prompt ended
// elsewhere stops its reply at the next heartbeat's check, or at once when
// the listener listens again after a drop.

import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Worker, WorkerError, type Settled, type WorkerOptions } from "./index.js";
import { Sql } from "./sql.js";
import { blocks, prompt, send, settledAs, testDatabase, waitFor, type TestDatabase } from "./testing/db.js";
import { sleep } from "./testing/models.js";

let db: TestDatabase;
const workers: Worker[] = [];

beforeEach(async () => {
  db = await testDatabase();
});

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
  vi.restoreAllMocks();
  await db.drop();
});

async function startWorker(opts: Partial<WorkerOptions> & Pick<WorkerOptions, "handler">): Promise<{ w: Worker; settled: Map<string, Settled> }> {
  const settled = new Map<string, Settled>();
  const w = new Worker({ connectionString: db.url, pollIntervalMs: 100, onSettled: (s) => settled.set(s.promptId, s), ...opts });
  workers.push(w);
  await w.start();
  return { w, settled };
}

/** Calls convo.expire_leases every 100 ms, as the server's maintenance does, until the returned function is called. */
function reapLeases(): () => Promise<void> {
  let on = true;
  const loop = (async () => {
    while (on) {
      await db.pool.query("SELECT convo.expire_leases()").catch(() => {});
      await sleep(100);
    }
  })();
  return async () => {
    on = false;
    await loop;
  };
}

/** A worker of one slot whose reply writes one word and then waits for an hour (nothing a refused write could answer), once that word is written. */
async function hangingReply(leaseSeconds: number) {
  const { settled } = await startWorker({
    slots: 1,
    leaseSeconds,
    handler: async (job) => {
      job.reply.text("hanging");
      await sleep(3_600_000, job.signal);
    },
  });
  const sent = await send(db.pool, "hang");
  await waitFor("the reply's first word", async () => (await blocks(db.pool, sent.messageId))[0]?.content === "hanging");
  return { settled, sent };
}

/** A handler that writes `ticks` words, one every `everyMs`. */
function ticking(ticks: number, everyMs: number) {
  return async (job: { reply: { text(t: string): void }; signal: AbortSignal }) => {
    for (let i = 0; i < ticks; i++) {
      job.reply.text(`tick${i} `);
      await sleep(everyMs, job.signal);
    }
  };
}

describe("the process lease", () => {
  it("one heartbeat per process, not per prompt: no batch carries a heartbeat", async () => {
    const beats = vi.spyOn(Sql.prototype, "workerHeartbeat");
    const promptBeats = vi.spyOn(Sql.prototype, "heartbeat");
    const writeBatch = Sql.prototype.writeBatch;
    let batchBeats = 0;
    vi.spyOn(Sql.prototype, "writeBatch").mockImplementation(function (this: Sql, worker, batch, ops, lane) {
      batchBeats += (JSON.parse(ops) as Array<{ op: string }>).filter((o) => o.op === "heartbeat").length;
      return writeBatch.call(this, worker, batch, ops, lane);
    });
    const start = Date.now();
    // A lease of 1 s: a heartbeat every 333 ms.
    const { settled } = await startWorker({ slots: 8, leaseSeconds: 1, handler: ticking(40, 50) });
    const sent = await Promise.all(Array.from({ length: 8 }, (_, i) => send(db.pool, `in parallel ${i}`)));
    for (const s of sent) expect((await settledAs(db.pool, s.promptId, "completed", "failed")).status).toBe("completed");
    await waitFor("every reply to settle", () => settled.size === 8);
    const elapsed = Date.now() - start;
    const n = beats.mock.calls.length;
    // One per interval for the process (a loaded machine may beat less
    // often), not one per prompt and interval.
    const perInterval = n / (elapsed / (1000 / 3));
    expect(n).toBeGreaterThanOrEqual(3);
    expect(perInterval).toBeLessThanOrEqual(1.5);
    expect(promptBeats).not.toHaveBeenCalled();
    expect(batchBeats).toBe(0);
    for (const s of settled.values()) expect(s.outcome).toBe("completed");
  });

  it("loses no reply when every batch write takes longer than the lease", async () => {
    // Every batch takes 2.5 s, with a lease of 1 s: a lease that rode in
    // the batches would run out between any two of them.
    const writeBatch = Sql.prototype.writeBatch;
    vi.spyOn(Sql.prototype, "writeBatch").mockImplementation(async function (this: Sql, worker, batch, ops, lane) {
      await sleep(2500);
      return writeBatch.call(this, worker, batch, ops, lane);
    });
    const stopReaping = reapLeases();
    try {
      const { settled } = await startWorker({ slots: 6, leaseSeconds: 1, handler: ticking(60, 20) });
      const sent = await Promise.all(Array.from({ length: 4 }, (_, i) => send(db.pool, `slowly ${i}`)));
      for (const s of sent) {
        const p = await settledAs(db.pool, s.promptId, "completed", "failed");
        expect(p).toMatchObject({ status: "completed", error: null });
        expect((await blocks(db.pool, s.messageId)).map((b) => b.content).join("")).toBe(
          Array.from({ length: 60 }, (_, i) => `tick${i} `).join(""),
        );
      }
      await waitFor("every reply to settle", () => settled.size === 4, 30_000);
      for (const s of settled.values()) expect(s.outcome).toBe("completed");
    } finally {
      await stopReaping();
    }
  }, 60_000);

  it("stops every reply when no heartbeat gets through for a lease, and serves again once one does", async () => {
    const workerHeartbeat = Sql.prototype.workerHeartbeat;
    let beatsFail = false;
    vi.spyOn(Sql.prototype, "workerHeartbeat").mockImplementation(function (this: Sql, ...args) {
      if (beatsFail) return Promise.reject(new Error("connection terminated unexpectedly"));
      return workerHeartbeat.apply(this, args);
    });
    let stoppedWith: unknown;
    const { settled } = await startWorker({
      workerId: "cut-off",
      slots: 2,
      leaseSeconds: 2,
      handler: async (job) => {
        if (job.history[0]?.role === "user" && job.history[0].text === "again") {
          job.reply.text("served");
          return;
        }
        try {
          await ticking(100_000, 20)(job);
        } catch (err) {
          stoppedWith = err;
          throw err;
        }
      },
    });
    const sent = await send(db.pool, "long");
    await waitFor("the reply's first words", async () => (await blocks(db.pool, sent.messageId))[0]?.content.includes("tick1"));
    // Its batches still go through; its heartbeats do not.
    beatsFail = true;
    const cut = Date.now();
    await waitFor("the reply to stop", () => settled.get(sent.promptId), 10_000);
    const after = Date.now() - cut;
    expect(after).toBeLessThanOrEqual(3000); // the lease, and a second for a loaded machine
    expect(settled.get(sent.promptId)).toMatchObject({ outcome: "stopped", error: expect.stringMatching(/process lease ran out/) });
    expect(stoppedWith).toBeInstanceOf(WorkerError);
    expect((stoppedWith as WorkerError).code).toBe("lease_lost");
    // It wrote nothing more: the text stays as it was when it stopped.
    const text = (await blocks(db.pool, sent.messageId))[0]?.content;
    await sleep(300);
    expect((await blocks(db.pool, sent.messageId))[0]?.content).toBe(text);
    // PostgreSQL fails it once the lease ran out there too.
    const failed = await waitFor("the reply to fail", async () => {
      await db.pool.query("SELECT convo.expire_leases()");
      const p = await prompt(db.pool, sent.promptId);
      return p.status === "failed" ? p : undefined;
    });
    expect(failed.error).toBe("lease expired: worker cut-off stopped heartbeating");
    // Heartbeats through again: a new lease, and new replies run.
    beatsFail = false;
    const next = await send(db.pool, "again");
    expect(await settledAs(db.pool, next.promptId, "completed", "failed")).toMatchObject({ status: "completed", worker: "cut-off" });
  }, 30_000);

  it("stops an idle reply whose prompt was failed elsewhere, at the next heartbeat's check", async () => {
    const { settled, sent } = await hangingReply(1);
    await db.pool.query("SELECT convo.fail_prompt($1, 'stopped by an operator')", [sent.promptId]);
    const ended = Date.now();
    const s = await waitFor("the reply to stop", () => settled.get(sent.promptId), 5_000);
    expect(s.outcome).toBe("stopped");
    expect(s.error).toMatch(/no longer this worker's \(failed\)/);
    // Within a heartbeat interval (333 ms), and a second for a loaded machine.
    expect(Date.now() - ended).toBeLessThanOrEqual(1500);
    expect((await prompt(db.pool, sent.promptId)).error).toBe("stopped by an operator");
  });

  it("stops an idle reply whose prompt was cancelled with the notification missed, as a cancellation", async () => {
    const { settled, sent } = await hangingReply(1);
    // Cancelled as convo.cancel_prompt would, with no notification heard.
    await db.pool.query("UPDATE convo.prompts SET status = 'cancelled' WHERE id = $1", [sent.promptId]);
    const s = await waitFor("the reply to stop", () => settled.get(sent.promptId), 5_000);
    expect(s.outcome).toBe("cancelled");
  });

  it("checks the prompts in flight when its listener listens again: a cancel missed meanwhile stops the reply at once", async () => {
    // Heartbeats 40 s apart: only the listener's reconnect can find, within
    // the test, a prompt cancelled while no notification was heard.
    const { settled, sent } = await hangingReply(120);
    await db.pool.query("UPDATE convo.prompts SET status = 'cancelled' WHERE id = $1", [sent.promptId]);
    const killed = await db.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'`,
    );
    expect(killed.rowCount).toBe(1);
    const s = await waitFor("the reply to stop", () => settled.get(sent.promptId), 10_000);
    expect(s.outcome).toBe("cancelled");
  });
});
