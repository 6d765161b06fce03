// Worker: claims prompts and runs a handler for each, up to `slots` at
// once, in one process. One claim loop takes prompts (convo.claim_prompts,
// several per call, in the fair SQL order), `lanes` committers write
// every reply's output in shared transactions (convo.write_batch), one
// heartbeat keeps the process's lease (which keeps every prompt it holds
// alive; lease.ts), and one LISTEN connection hears new prompts and
// cancellations. The number of replies in flight does not change the
// connections it uses.

import { createHash } from "node:crypto";
import { setMaxListeners } from "node:events";
import pg from "pg";
import { Committer } from "./committer.js";
import { WorkerError, messageOf } from "./errors.js";
import { historyOf, type ContextFiles, type PromptFile } from "./history.js";
import { PromptInput } from "./inputs.js";
import type { Job } from "./job.js";
import { ProcessLease } from "./lease.js";
import { Listener } from "./listener.js";
import { PromptSpan, loadOtel } from "./otel.js";
import { settingsOf, type Settings, type Settled, type WorkerOptions } from "./options.js";
import { Reply } from "./reply.js";
import { Sql, retryable, type ClaimRow, type ContextRow, type InputRow } from "./sql.js";

/** The most prompts one claim takes. */
const claimBatch = 100;

interface Running {
  abort: AbortController;
  done: Promise<void>;
  reply?: Reply;
}

export class Worker {
  private readonly s: Settings;
  private readonly handler: (job: Job) => Promise<void>;
  private readonly onSettled?: (s: Settled) => void;
  private readonly pool: pg.Pool;
  private readonly ownPool: boolean;
  private readonly sql: Sql;
  private readonly committers: Committer[];
  /** @opentelemetry/api when the app has it (loaded by start()): each prompt's span (otel.ts). */
  private otel?: Awaited<ReturnType<typeof loadOtel>>;
  /** The process lease's heartbeats, on a pool (one connection) of their own. */
  private readonly beatPool: pg.Pool;
  private readonly lease: ProcessLease;
  private listener: Listener | undefined;
  private readonly running = new Map<string, Running>();
  private state: "new" | "running" | "draining" | "stopped" = "new";
  private claimLoop: Promise<void> | undefined;
  /** A wake-up not acted on yet (a notification, a slot freed). */
  private token = false;
  private wakeClaims: (() => void) | undefined;
  private stopping: Promise<void> | undefined;
  /** start() connecting; settled once the worker listens and claims (or failed to). */
  private starting: Promise<void> | undefined;
  private readonly onPoolError = (err: Error) => this.s.logger.warn("an idle connection of the pool failed", { err: err.message });
  // A connection that fails while it closes (the pool ending as
  // PostgreSQL restarts) emits an error no query is there to take: every
  // connection gets a listener, so it never crashes the process.
  private readonly onPoolConnect = (c: pg.PoolClient) => c.on("error", () => {});

  constructor(opts: WorkerOptions) {
    this.s = settingsOf(opts);
    this.handler = opts.handler;
    this.onSettled = opts.onSettled;
    this.ownPool = !opts.pool;
    // Connections: one per lane writing a batch, one for the claim loop,
    // and reads when prompts start; the listener and the heartbeat have
    // their own, so that neither waits behind batches or reads.
    this.pool = opts.pool ?? new pg.Pool({ connectionString: opts.connectionString, max: this.s.lanes + 2 });
    this.sql = new Sql(this.pool, this.s.callTimeoutMs);
    this.committers = Array.from({ length: this.s.lanes }, (_, lane) => new Committer(this.sql, this.s, lane));
    this.beatPool = new pg.Pool({ ...listenConfig(this.pool), max: 1 });
    this.lease = new ProcessLease(new Sql(this.beatPool, this.s.callTimeoutMs), this.s, {
      lost: (err) => {
        for (const r of this.running.values()) r.abort.abort(err);
      },
      taken: () => this.wake(),
      check: () => this.stopGone(),
    });
  }

  /** The name the worker claims prompts under. */
  get workerId(): string {
    return this.s.workerId;
  }

  /** The prompts running now. */
  get inFlight(): number {
    return this.running.size;
  }

  /** Batches written so far (write_batch calls that answered), every lane together. */
  get batchesWritten(): number {
    return this.committers.reduce((n, c) => n + c.batches, 0);
  }

  /**
   * Connects the LISTEN connection and starts claiming. Resolves once the
   * worker listens (a prompt queued from then on is not missed; one queued
   * before is found by the first claim); throws when PostgreSQL cannot be
   * reached.
   */
  start(): Promise<void> {
    if (this.state !== "new") return Promise.reject(new WorkerError("invalid_argument", "start: the worker was started already"));
    this.state = "running";
    this.starting = this.connect();
    return this.starting;
  }

  /**
   * The body of start(). A drain() or stop() called meanwhile (a SIGTERM as
   * the process starts) waits for it, so that it stops what it started.
   */
  private async connect(): Promise<void> {
    this.otel = await loadOtel();
    this.pool.on("error", this.onPoolError);
    this.pool.on("connect", this.onPoolConnect);
    this.beatPool.on("error", this.onPoolError);
    this.beatPool.on("connect", this.onPoolConnect);
    const listener = new Listener(listenConfig(this.pool), this.s.logger, {
      queued: () => this.wake(),
      cancelled: (id) => this.running.get(id)?.abort.abort(new WorkerError("cancelled", "the prompt was cancelled")),
      // Notifications sent while it was away are lost: the queue is
      // looked at again, and so are the prompts in flight (a cancel).
      connected: () => {
        this.wake();
        this.lease.checkNow();
      },
    });
    try {
      await listener.start();
    } catch (err) {
      this.state = "stopped";
      this.pool.off("error", this.onPoolError);
      this.pool.off("connect", this.onPoolConnect);
      if (this.ownPool) await this.pool.end().catch(() => {});
      await this.beatPool.end().catch(() => {});
      throw new WorkerError("database", `start the worker: ${messageOf(err)}`, { cause: err });
    }
    this.listener = listener;
    for (const c of this.committers) c.start();
    // The first heartbeat takes the lease (letting go of whatever a dead
    // process of the same name held); the claim loop waits for it.
    this.lease.start();
    this.claimLoop = this.claim();
    this.s.logger.info("worker started", { worker: this.s.workerId, slots: this.s.slots });
  }

  /**
   * Stops claiming at once and lets the prompts in flight finish for up to
   * timeoutMs; then stops the rest as stop() does. A process that is told
   * to stop (SIGTERM) drains, so that replies in progress complete.
   */
  async drain(timeoutMs: number): Promise<void> {
    if (this.state === "running") this.state = "draining";
    await this.starting?.catch(() => {});
    this.wake();
    await this.claimLoop;
    const all = Promise.all([...this.running.values()].map((r) => r.done));
    let timer: NodeJS.Timeout | undefined;
    const finished = await Promise.race([
      all.then(() => true),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(false), Math.max(0, timeoutMs)))),
    ]);
    clearTimeout(timer);
    if (!finished) this.s.logger.warn("drained: stopping the prompts still in flight", { prompts: this.running.size });
    await this.stop();
  }

  /**
   * Stops claiming, stops every prompt in flight (its signal fires; one
   * that started is failed with "worker … stopped before the reply finished
   * (shutting down)", one claimed and not started is handed back to the
   * queue), writes what they queued, and closes the worker's connections.
   * Safe to call more than once.
   */
  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  /** Drains on the first of signals (default SIGTERM and SIGINT), giving the replies in flight timeoutMs, then resolves; the caller exits. */
  drainOnSignal(timeoutMs: number, signals: NodeJS.Signals[] = ["SIGTERM", "SIGINT"]): Promise<NodeJS.Signals> {
    return new Promise((resolve, reject) => {
      const on = (sig: NodeJS.Signals) => {
        for (const s of signals) process.off(s, on);
        this.drain(timeoutMs).then(() => resolve(sig), reject);
      };
      for (const s of signals) process.once(s, on);
    });
  }

  private async shutdown(): Promise<void> {
    const wasNew = this.state === "new";
    this.state = "stopped";
    await this.starting?.catch(() => {});
    this.wake();
    await this.claimLoop;
    for (const r of this.running.values()) {
      r.abort.abort(new WorkerError("shutting_down", `worker ${this.s.workerId} is shutting down`));
    }
    await Promise.all([...this.running.values()].map((r) => r.done));
    await Promise.all(this.committers.map((c) => c.stop()));
    // The lease outlives the prompts in flight (a drain lets them finish),
    // as the committers do.
    await this.lease.stop();
    await this.beatPool.end().catch(() => {});
    await this.listener?.close();
    // Our own pool keeps its listeners for good: pg's pool.end() resolves
    // before its connections have closed, and one the server terminates
    // meanwhile (a restart, a dropped database) makes the pool emit an
    // error, which would crash the process with no listener to take it.
    // A pool of the caller's gets its own listeners back as it was.
    if (this.ownPool) {
      await this.pool.end().catch(() => {});
    } else if (!wasNew) {
      this.pool.off("error", this.onPoolError);
      this.pool.off("connect", this.onPoolConnect);
    }
    if (!wasNew) this.s.logger.info("worker stopped", { worker: this.s.workerId });
  }

  private wake(): void {
    this.token = true;
    this.wakeClaims?.();
  }

  /** Waits for a wake-up or ms. */
  private idle(ms: number): Promise<void> {
    if (this.token) {
      this.token = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(t);
        self.wakeClaims = undefined;
        self.token = false;
        resolve();
      }
      this.wakeClaims = done;
    });
  }

  /**
   * The claim loop: claims while slots are free and the process lease is
   * live (a claim without it would hold prompts that nothing keeps alive;
   * the heartbeat wakes the loop when it takes the lease), until claiming
   * stops. A claim that straddles a lapse of the lease hands its prompts
   * back.
   * With nothing to claim it waits for a notification, a slot that frees,
   * or the poll interval (with jitter, so that many processes do not poll
   * in step). After a failed claim (PostgreSQL restarting) it tries again
   * after a backoff of 100 ms doubling to 5 s, not at the next poll: the
   * notification that woke it is spent.
   */
  private async claim(): Promise<void> {
    let retryMs = 100;
    while (this.state === "running") {
      const free = this.s.slots - this.running.size;
      let failed = false;
      const { epoch, live } = this.lease.live();
      if (free > 0 && live) {
        const n = Math.min(free, claimBatch);
        try {
          const rows = await this.sql.claimPrompts(this.s.workerId, this.s.leaseSeconds, n, Math.min(this.s.reservedSlots, n));
          retryMs = 100;
          if (rows.length > 0 && !this.lease.held(epoch)) {
            // The lease ran out during the claim: these prompts are let go
            // (or will be); hand them back now.
            for (const row of rows) await this.releaseUnstarted(row.prompt_id);
            continue;
          }
          for (const row of rows) {
            if (this.state === "running") this.launch(row);
            else await this.releaseUnstarted(row.prompt_id);
          }
          if (rows.length > 0) continue; // perhaps more are queued
        } catch (err) {
          failed = true;
          if (this.state === "running") this.s.logger.warn("claim prompts", { err: messageOf(err) });
        }
      }
      let wait = this.s.pollIntervalMs / 2 + Math.random() * this.s.pollIntervalMs;
      if (failed) {
        wait = retryMs;
        retryMs = Math.min(retryMs * 2, Math.min(5000, this.s.pollIntervalMs));
      }
      if (this.state !== "running") break;
      await this.idle(wait);
    }
  }

  private launch(row: ClaimRow): void {
    const abort = new AbortController();
    // The AI SDK and a handler's tools may each listen to the job's signal.
    setMaxListeners(100, abort.signal);
    const entry: Running = { abort, done: Promise.resolve() };
    this.running.set(row.prompt_id, entry);
    entry.done = this.run(row, abort).finally(() => {
      this.running.delete(row.prompt_id);
      this.wake(); // a slot is free
    });
  }

  private committerFor(conversationId: string): Committer {
    // FNV-1a: every reply of a conversation (an A/B comparison's two)
    // goes through the same lane, so they are written in one order.
    let h = 0x811c9dc5;
    for (let i = 0; i < conversationId.length; i++) {
      h ^= conversationId.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return this.committers[h % this.committers.length];
  }

  /** Runs one claimed prompt to its end and settles it. */
  private async run(row: ClaimRow, abort: AbortController): Promise<void> {
    const startedAt = Date.now();
    const committer = this.committerFor(row.conversation_id);
    const reply = new Reply(row.prompt_id, committer, { coalesce: this.s.batchIntervalMs >= 0, batchBytes: this.s.batchBytes }, (err) =>
      abort.abort(err),
    );
    // The job's signal stops the reply: nothing more is written.
    abort.signal.addEventListener("abort", () => reply.stop(reasonOf(abort.signal)), { once: true });
    committer.add(reply);
    const entry = this.running.get(row.prompt_id);
    if (entry) entry.reply = reply;
    const span = PromptSpan.start(this.otel, row, this.s.workerId);
    let settled: Settled;
    try {
      settled = await this.execute(row, reply, abort, span);
    } catch (err) {
      settled = { promptId: row.prompt_id, outcome: "stopped", error: messageOf(err), durationMs: 0 };
    } finally {
      committer.remove(reply);
    }
    settled.durationMs = Date.now() - startedAt;
    span.end(settled);
    const log = settled.outcome === "failed" ? this.s.logger.warn : this.s.logger.info;
    log.call(this.s.logger, `prompt ${settled.outcome}`, { promptId: row.prompt_id, error: settled.error, durationMs: settled.durationMs });
    try {
      this.onSettled?.(settled);
    } catch (err) {
      this.s.logger.error("onSettled threw", { err: messageOf(err) });
    }
  }

  private async execute(row: ClaimRow, reply: Reply, abort: AbortController, span: PromptSpan): Promise<Settled> {
    const promptId = row.prompt_id;
    const out = (outcome: Settled["outcome"], error?: string): Settled => ({ promptId, outcome, error, durationMs: 0 });
    let err: unknown;
    let handlerDone = false;
    try {
      // start_prompt goes in the next batch while the conversation is
      // read; the handler runs once it is written, so a prompt cancelled
      // meanwhile never reaches the model.
      reply.start();
      const [rows, files, resumed] = await Promise.all([
        this.readWithRetry(() => this.sql.context(promptId, this.s.workerId)),
        this.readFiles(promptId),
        row.resumed ? this.readResumed(promptId) : undefined,
        reply.flush(),
      ]);
      const inputs = resumed ? resumed.inputs.map((r) => new PromptInput(reply, r, callIdOf(resumed.reply, r.tool_call_id))) : [];
      const job: Job = {
        promptId,
        conversationId: row.conversation_id,
        messageId: row.message_id,
        modelConfig: row.model_config ?? {},
        attempts: row.attempts,
        history: historyOf(rows, files),
        resumed: row.resumed,
        replySoFar: resumed ? replySoFarOf(resumed.reply, inputs) : [],
        inputs,
        traceparent: row.trace_context?.traceparent,
        tracestate: row.trace_context?.tracestate,
        signal: abort.signal,
        reply,
      };
      // The handler may notice its signal late: the prompt settles (and its
      // slot frees) when the signal fires, whatever the handler does.
      const handled = Promise.resolve().then(() => span.run(() => this.handler(job)));
      handled.catch(() => {});
      await Promise.race([handled, aborted(abort.signal)]);
      handlerDone = true;
      // Parked: the prompt waits for a person and is no longer ours.
      if (reply.isWaiting) return out("waiting");
      if (!abort.signal.aborted) await reply.complete();
      if (!abort.signal.aborted) return out("completed");
    } catch (e) {
      err = e;
    }
    if (reply.isWaiting) {
      // The handler threw after it parked the prompt: it waits all the same.
      this.s.logger.warn("the handler failed after the prompt was parked; it waits for input", { promptId, err: messageOf(err) });
      return out("waiting");
    }
    if (abort.signal.aborted) return this.stopped(reply, reasonOf(abort.signal), out);
    // The handler (or the model in it) failed: what it wrote before stays,
    // and the prompt fails with its message.
    const message = messageOf(err);
    if (!handlerDone) this.s.logger.debug("prompt failed before its handler returned", { promptId, err: message });
    try {
      await reply.failWith(message);
      return out("failed", message);
    } catch (e) {
      // An op the handler queued before fail_prompt was refused, or the
      // batch failed: fail it on its own if it is still ours, with the
      // handler's error.
      if (abort.signal.aborted) return this.stopped(reply, reasonOf(abort.signal), out, message);
      return out("stopped", messageOf(e));
    }
  }

  /** Settles a prompt whose signal fired, for reason; one still this worker's is failed with failure, if given, else the reason. */
  private async stopped(
    reply: Reply,
    reason: WorkerError,
    out: (o: Settled["outcome"], e?: string) => Settled,
    failure?: string,
  ): Promise<Settled> {
    switch (reason.code) {
      case "cancelled":
        return out("cancelled", reason.message);
      case "lease_lost":
        return out("stopped", reason.message);
      case "shutting_down":
        if (!reply.isStarted) {
          await this.releaseUnstarted(reply.promptId);
          return out("stopped", reason.message);
        }
        return this.failAfterStop(reply, `worker ${this.s.workerId} stopped before the reply finished (shutting down)`, out);
      default: {
        // A refused write, or PostgreSQL unreachable for a lease: is the
        // prompt still ours to fail? (convo.heartbeat answers that; for a
        // prompt held under the process lease it changes nothing.)
        let keep = false;
        try {
          keep = await this.sql.heartbeat(reply.promptId, this.s.workerId);
        } catch {
          return out("stopped", reason.message);
        }
        if (!keep) {
          const status = await this.sql.status(reply.promptId, this.s.workerId).catch(() => undefined);
          return out(status === "cancelled" ? "cancelled" : "stopped", reason.message);
        }
        if (!reply.isStarted) {
          await this.releaseUnstarted(reply.promptId);
          return out("stopped", reason.message);
        }
        return this.failAfterStop(reply, failure ?? reason.message, out);
      }
    }
  }

  private async failAfterStop(reply: Reply, message: string, out: (o: Settled["outcome"], e?: string) => Settled): Promise<Settled> {
    try {
      await reply.failWith(message);
      return out("failed", message);
    } catch (e) {
      return out("stopped", `${message}; failing the prompt: ${messageOf(e)}`);
    }
  }

  /**
   * Stops the replies in flight whose prompts are no longer this worker's
   * (one read for them all, after a heartbeat): cancelled ones as a
   * cancellation, the others as lost. A reply settling its own prompt
   * (completed or failed by it) is left to finish.
   */
  private async stopGone(): Promise<void> {
    const ids = [...this.running.keys()];
    if (ids.length === 0) return;
    for (const g of await this.sql.promptsGone(this.s.workerId, ids)) {
      const r = this.running.get(g.prompt_id);
      if (!r || r.abort.signal.aborted || g.status === "completed" || (g.status === "failed" && r.reply?.isSettling)) continue;
      r.abort.abort(
        g.status === "cancelled"
          ? new WorkerError("cancelled", "the prompt was cancelled")
          : new WorkerError("lease_lost", `the prompt is no longer this worker's (${g.status === "" ? "held by another worker or none" : g.status})`),
      );
    }
  }

  /** A resumed prompt's reply so far and its answers. */
  private async readResumed(promptId: string): Promise<{ reply: ContextRow[]; inputs: InputRow[] }> {
    const [reply, inputs] = await Promise.all([
      this.readWithRetry(() => this.sql.replySoFar(promptId, this.s.workerId)),
      this.readWithRetry(() => this.sql.inputs(promptId, this.s.workerId)),
    ]);
    return { reply, inputs };
  }

  /**
   * The files of the prompt's context by message, each with its bytes
   * (read a chunk at a time through convo.file_chunk, then checked against
   * the file's size and SHA-256) unless it is in S3 or larger than
   * maxFileBytes. Each read is retried while PostgreSQL is unreachable;
   * bytes that do not match the file fail the prompt.
   */
  private async readFiles(promptId: string): Promise<ContextFiles> {
    const out: ContextFiles = new Map();
    for (const r of await this.readWithRetry(() => this.sql.files(promptId, this.s.workerId))) {
      const f: PromptFile = {
        id: r.file_id,
        filename: r.filename,
        mediaType: r.media_type,
        size: Number(r.size),
        sha256: r.sha256,
        storage: r.storage,
        blobId: r.blob_id,
      };
      if (r.storage === "postgres" && f.size <= this.s.maxFileBytes) {
        const data = new Uint8Array(f.size);
        const hash = createHash("sha256");
        let at = 0;
        for (let seq = 0; seq < r.chunks; seq++) {
          const chunk = await this.readWithRetry(() => this.sql.fileChunk(promptId, this.s.workerId, f.id, seq));
          if (at + chunk.length > f.size) break;
          data.set(chunk, at);
          hash.update(chunk);
          at += chunk.length;
        }
        const sum = hash.digest("hex");
        if (at !== f.size || sum !== f.sha256) {
          throw new Error(`file ${f.id} (${f.filename}): read ${at} bytes with SHA-256 ${sum}, want ${f.size} bytes with ${f.sha256}`);
        }
        f.data = data;
      }
      const entry = out.get(r.message_id) ?? { position: BigInt(r.message_position), files: [] };
      entry.files.push(f);
      out.set(r.message_id, entry);
    }
    return out;
  }

  /** Runs a read, retrying while PostgreSQL is unreachable (for up to a lease). */
  private async readWithRetry<T>(read: () => Promise<T>): Promise<T> {
    const giveUp = Date.now() + this.s.leaseSeconds * 1000;
    for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
      try {
        return await read();
      } catch (err) {
        if (!retryable(err) || Date.now() + delay > giveUp) throw err;
        await new Promise((r) => setTimeout(r, delay));
      }
    }
  }

  private async releaseUnstarted(promptId: string): Promise<void> {
    try {
      await this.sql.release(promptId, this.s.workerId);
    } catch (err) {
      this.s.logger.warn("release the prompt; it is claimable again when its lease expires", { promptId, err: messageOf(err) });
    }
  }
}

/** The model's id of a call (its tool_use block's callId), or convo's id when the block has none. */
function callIdOf(reply: ContextRow[], toolCallId: string): string {
  const b = reply.find((r) => r.tool_call_id === toolCallId);
  const id = b?.metadata?.callId;
  return typeof id === "string" && id !== "" ? id : toolCallId;
}

/** The reply so far as the model's turns, without results for the calls the handler has yet to settle. */
function replySoFarOf(rows: ContextRow[], inputs: PromptInput[]) {
  const open = new Set(inputs.filter((i) => i.open).map((i) => i.toolCall.id));
  return historyOf(rows).filter((m) => m.role !== "tool" || !open.has(m.toolCallId));
}

function reasonOf(signal: AbortSignal): WorkerError {
  const r: unknown = signal.reason;
  return r instanceof WorkerError ? r : new WorkerError("shutting_down", messageOf(r));
}

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

/** The connection settings of pool, for the LISTEN connection. */
function listenConfig(pool: pg.Pool): pg.ClientConfig {
  const o = (pool as unknown as { options: pg.PoolConfig }).options;
  const { max: _max, min: _min, idleTimeoutMillis: _i, connectionTimeoutMillis: _c, ...client } = o;
  return client;
}
