// The committer of one lane: it writes the queued ops of every reply of
// its lane in one call of convo.write_batch per tick (one transaction, one
// notification per conversation), whatever the number of replies. It is
// the group commit of the runtime; docs/workers-typescript.md says how it
// paces batches and why.

import { WorkerError, messageOf } from "./errors.js";
import { costOf, describe, encodeOps, type Op } from "./ops.js";
import type { Reply } from "./reply.js";
import { retryable, sqlStateOf, type RefusedRow, type Sql } from "./sql.js";
import type { Settings } from "./options.js";

/** About 1,500 appends' worth of ops per batch: a burst is written in several batches, so no event waits long in its batch for the commit. */
const batchBudget = 1500;

interface Part {
  reply: Reply;
  first: number; // index of its first op in the batch
  ops: Op[];
}

export class Committer {
  private readonly replies = new Set<Reply>();
  private pending = false;
  private urgent = false;
  private stopping = false;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  /** The number of the last batch: from the clock (µs), or from the lane's mark in convo.worker_batches when that is further. */
  private batch = BigInt(Date.now()) * 1000n;
  private numbered = false;
  /** Batches written, and the ops in them (for tests and metrics). */
  batches = 0;

  constructor(
    private readonly sql: Sql,
    private readonly s: Settings,
    readonly lane: number,
  ) {}

  add(r: Reply): void {
    this.replies.add(r);
  }

  remove(r: Reply): void {
    this.replies.delete(r);
  }

  /** A reply queued ops; urgent ones skip the interval. */
  queued(urgent: boolean): void {
    this.pending = true;
    this.urgent ||= urgent;
    this.wake?.();
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops after the batch in flight, if any. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake?.();
    await this.loop;
  }

  /** Sleeps ms, or until woken. */
  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.wake = () => {
        this.wake = undefined;
        done();
      };
    });
  }

  private async run(): Promise<void> {
    let lastEnd = 0;
    let lastTook = 0;
    while (!this.stopping) {
      if (!this.pending) {
        // Nothing to write: a reply that queues wakes the lane. (No
        // heartbeat is due here: the worker's process lease keeps every
        // prompt alive, on its own timer and connection.)
        await this.sleep(60_000);
        continue;
      }
      // Busy at most half the time: a batch that took long is followed by
      // a pause as long, in which ops gather (more text per delta).
      const gap = this.s.batchIntervalMs < 0 ? 0 : Math.max(this.s.batchIntervalMs, lastTook);
      const wait = lastEnd + gap - Date.now();
      if (!this.urgent && wait > 0) {
        await this.sleep(wait);
        if (!this.urgent && lastEnd + gap > Date.now()) continue; // woken early, not urgent: wait on
      }
      const start = Date.now();
      await this.flush();
      lastEnd = Date.now();
      lastTook = lastEnd - start;
    }
  }

  /** Writes one batch: every reply's queued ops, oldest waiting first. */
  async flush(): Promise<void> {
    this.pending = false;
    this.urgent = false;
    const replies = [...this.replies];
    const since = new Map(replies.map((r) => [r, r.waitingSince()]));
    replies.sort((a, b) => since.get(a)! - since.get(b)!);
    const parts: Part[] = [];
    const wire: Array<Op & { prompt: string }> = [];
    let cost = 0;
    for (let i = 0; i < replies.length; i++) {
      if (cost >= batchBudget) {
        // The rest go in the next batch, which starts at once.
        if (replies.slice(i).some((r) => r.hasQueued)) this.queued(true);
        break;
      }
      const r = replies[i];
      const ops = r.take();
      if (ops.length === 0) continue;
      parts.push({ reply: r, first: wire.length, ops });
      for (const o of ops) {
        wire.push({ ...o, prompt: r.promptId });
        cost += costOf(o);
      }
    }
    if (wire.length === 0) return;
    try {
      const refused = await this.write(encodeOps(wire));
      this.settle(parts, refused);
    } catch (err) {
      if (parts.length > 1 && sqlStateOf(err) !== undefined && !retryable(err)) {
        // PostgreSQL refused the batch as a whole, which no reply's state
        // explains (write_batch refuses those one by one): write each
        // reply on its own, so that only the one at fault fails.
        this.s.logger.warn("write a batch: refused whole; writing its replies one by one", { err: messageOf(err), replies: parts.length });
        for (const p of parts) {
          const own = wire.slice(p.first, p.first + p.ops.length);
          try {
            this.settle([{ ...p, first: 0 }], await this.write(encodeOps(own)));
          } catch (e) {
            this.settle([p], [], e);
          }
        }
        return;
      }
      this.settle(parts, [], err);
    }
  }

  /**
   * Calls write_batch, sending the same batch (same number, same ops) again
   * while the failure is the connection's or PostgreSQL asks for a retry,
   * for at most a lease: write_batch applies a batch number once.
   */
  private async write(ops: string): Promise<RefusedRow[]> {
    if (!this.numbered) await this.numberFromMark();
    this.batch++;
    let renumbered = false;
    const giveUp = Date.now() + this.s.leaseSeconds * 1000;
    let delay = 20;
    for (let attempt = 1; ; attempt++) {
      try {
        const rows = await this.sql.writeBatch(this.s.workerId, this.batch, ops, this.lane);
        this.batches++;
        return rows;
      } catch (err) {
        if (sqlStateOf(err) === "CV002" && !renumbered) {
          // Another process numbered this worker's lane further (the same
          // name, or a clock that went back): go on from its last batch.
          // Nothing of this batch was applied.
          renumbered = true;
          await this.numberFromMark();
          this.batch++;
          continue;
        }
        if (!retryable(err) || Date.now() + delay > giveUp) throw err;
        this.s.logger.warn("write a batch: retrying", { err: messageOf(err), attempt, retryInMs: delay });
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(2 * delay, 2000);
      }
    }
  }

  private async numberFromMark(): Promise<void> {
    try {
      const mark = await this.sql.batchMark(this.s.workerId, this.lane);
      if (mark !== undefined && mark > this.batch) this.batch = mark;
      this.numbered = true;
    } catch {
      // Read again before the next batch; this one is numbered from the clock.
    }
  }

  /** Tells each reply of a batch what became of its ops. */
  private settle(parts: Part[], refused: RefusedRow[], err?: unknown): void {
    const byPrompt = new Map(refused.map((r) => [r.prompt_id, r]));
    for (const p of parts) {
      if (err !== undefined) {
        const e =
          err instanceof WorkerError
            ? err
            : new WorkerError("database", `write the batch: ${messageOf(err)}`, { cause: err, sqlState: sqlStateOf(err) });
        p.reply.settled(p.ops, 0, e);
        continue;
      }
      const r = byPrompt.get(p.reply.promptId);
      if (!r) {
        p.reply.settled(p.ops, p.ops.length);
        continue;
      }
      const applied = Math.min(Math.max(r.op_index - p.first, 0), p.ops.length);
      const what = applied < p.ops.length ? describe(p.ops[applied]) : "write";
      p.reply.settled(p.ops, applied, refusal(what, r));
    }
  }
}

/** The error of a prompt write_batch refused: cancelled, lease lost, or a refused write. */
function refusal(what: string, r: RefusedRow): WorkerError {
  const message = `${what}: ${r.message} (${r.code})`;
  if (r.code === "CV002" && /is cancelled, not running/.test(r.message)) {
    return new WorkerError("cancelled", "the prompt was cancelled", { sqlState: r.code });
  }
  if (r.code === "CV002" && /no longer held by worker|is (failed|completed), not running|is held by .*, not by /.test(r.message)) {
    return new WorkerError("lease_lost", `the prompt is no longer this worker's: ${r.message}`, { sqlState: r.code });
  }
  return new WorkerError("write_refused", message, { sqlState: r.code });
}
