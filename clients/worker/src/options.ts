// The settings of a Worker, their defaults (those of the Go runtime,
// docs/workers.md) and their checks.

import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import type pg from "pg";
import { invalidArgument } from "./errors.js";
import type { Job } from "./job.js";

/** A logger: console fits, and so do pino and winston. */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** What happened to a prompt a worker claimed, told to `onSettled`. */
export interface Settled {
  promptId: string;
  /**
   * completed: the handler returned; failed: it threw (or the model's stream
   * failed) and the prompt was failed with `error`; cancelled: the user
   * cancelled it; stopped: it is no longer this worker's (lease lost), or
   * it was handed back unstarted; waiting: the handler parked it
   * (Reply.waitForInput), it waits for a person, and any worker resumes it.
   */
  outcome: "completed" | "failed" | "cancelled" | "stopped" | "waiting";
  error?: string;
  durationMs: number;
}

export interface WorkerOptions {
  /** A pg.Pool to use (the worker does not end it), or a connection string (the worker makes and ends its own pool). */
  pool?: pg.Pool;
  connectionString?: string;
  /** Runs one prompt. Returns: the prompt is completed (unless the handler parked it: reply.waitForInput). Throws: it is failed with the error's message (the partial reply stays). */
  handler: (job: Job) => Promise<void>;
  /** The name this process claims prompts under, unique per process. Default: host-pid-random. */
  workerId?: string;
  /** Prompts run at once. Default 4. */
  slots?: number;
  /** Of the slots, how many only take prompts of users who hold none (docs/workers.md, "Fair slots"). Default 0. */
  reservedSlots?: number;
  /**
   * The worker process's lease (convo.worker_heartbeat), which keeps every
   * prompt it claimed alive: one heartbeat per process every third of it,
   * on a connection of its own. When no heartbeat gets through for this
   * long, every reply in flight stops (lease_lost). Default 30 s.
   */
  leaseSeconds?: number;
  /** Shortest time between two batches; negative: no pause and no coalescing of text. Default 20 ms. */
  batchIntervalMs?: number;
  /** Connections that write batches at once; each conversation's replies always go through the same one. Default 2. */
  lanes?: number;
  /** How often an idle worker polls the queue besides LISTEN. Default 10 s. */
  pollIntervalMs?: number;
  /** Timeout of one SQL call. Default 30 s. */
  callTimeoutMs?: number;
  /** Pending text of one reply that makes its batch go at once. Default 4096 bytes. */
  batchBytes?: number;
  /**
   * The largest file of a prompt's context whose bytes the runtime reads
   * for the handler (PromptFile.data); a larger one is given without
   * them. Default 10 MiB.
   */
  maxFileBytes?: number;
  /** Where the worker logs. Default: nothing. */
  logger?: Logger;
  /** Called once each claimed prompt is settled. */
  onSettled?: (settled: Settled) => void;
}

/** WorkerOptions with every default applied. */
export interface Settings {
  workerId: string;
  slots: number;
  reservedSlots: number;
  leaseSeconds: number;
  heartbeatMs: number;
  batchIntervalMs: number;
  lanes: number;
  pollIntervalMs: number;
  callTimeoutMs: number;
  batchBytes: number;
  maxFileBytes: number;
  logger: Logger;
}

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

export function defaultWorkerId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
}

/** Checks opts, naming the first bad field, and fills in the defaults. */
export function settingsOf(opts: WorkerOptions): Settings {
  if (typeof opts !== "object" || opts === null) throw invalidArgument("Worker options must be an object");
  if (typeof opts.handler !== "function") throw invalidArgument("handler must be a function (job) => Promise<void>");
  if (!opts.pool === !opts.connectionString) {
    throw invalidArgument("give exactly one of pool (a pg.Pool) and connectionString");
  }
  const int = (name: string, v: number | undefined, def: number, min: number, max: number): number => {
    if (v === undefined) return def;
    if (!Number.isInteger(v) || v < min || v > max) {
      throw invalidArgument(`${name} must be a whole number from ${min} to ${max}, got ${String(v)}`);
    }
    return v;
  };
  const slots = int("slots", opts.slots, 4, 1, 100_000);
  const leaseSeconds = int("leaseSeconds", opts.leaseSeconds, 30, 1, 3600);
  const workerId = opts.workerId ?? defaultWorkerId();
  if (typeof workerId !== "string" || workerId.trim() === "") {
    throw invalidArgument("workerId must be a non-empty string");
  }
  const batchIntervalMs = opts.batchIntervalMs ?? 20;
  if (typeof batchIntervalMs !== "number" || !Number.isFinite(batchIntervalMs)) {
    throw invalidArgument(`batchIntervalMs must be a number of milliseconds, got ${String(opts.batchIntervalMs)}`);
  }
  return {
    workerId,
    slots,
    reservedSlots: int("reservedSlots", opts.reservedSlots, 0, 0, slots),
    leaseSeconds,
    // A third of the lease, as the Go runtime: two heartbeats may be lost
    // before the lease runs out.
    heartbeatMs: (leaseSeconds * 1000) / 3,
    batchIntervalMs,
    lanes: int("lanes", opts.lanes, 2, 1, 64),
    pollIntervalMs: int("pollIntervalMs", opts.pollIntervalMs, 10_000, 10, 3_600_000),
    callTimeoutMs: int("callTimeoutMs", opts.callTimeoutMs, 30_000, 100, 3_600_000),
    batchBytes: int("batchBytes", opts.batchBytes, 4096, 1, 1 << 30),
    maxFileBytes: int("maxFileBytes", opts.maxFileBytes, 10 << 20, 0, 1 << 30),
    logger: opts.logger ?? silent,
  };
}
