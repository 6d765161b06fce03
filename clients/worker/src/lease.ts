// The process lease (convo.worker_heartbeat; docs/worker-api.md, "Two
// leases"), as the Go runtime keeps it: one heartbeat per Worker, every
// third of the lease, from its own timer and on a connection of its own,
// keeps every prompt the worker claimed alive, however many run and
// however long the committers' batches wait. No heartbeat rides in a
// batch.
//
// The worker claims only while its lease is live by its own clock: until
// the send time of the last heartbeat that extended it, plus the lease
// (PostgreSQL's end of the lease is later: it counts from when the call
// arrived). When that time passes with no heartbeat through (PostgreSQL
// unreachable, the calls timing out), every reply in flight stops,
// writing nothing more: PostgreSQL fails them (or hands them back to the
// queue) once the lease ran out there too. The next heartbeat that gets
// through then starts a new lease and lets go, at once, of whatever the
// old one held (starting), so that no prompt this process dropped stays
// held by it. A heartbeat that answers false (the lease had run out in
// PostgreSQL) stops every reply in flight too.
//
// After each heartbeat through, one read asks which of the prompts in
// flight are no longer the worker's (cancelled with the notification
// missed, failed or handed back by someone else): those stop. A slow read
// never holds up the next heartbeat.

import { WorkerError, messageOf } from "./errors.js";
import type { Settings } from "./options.js";
import type { Sql } from "./sql.js";

/** The first wait before a failed heartbeat is tried again; it doubles up to the heartbeat interval. */
const heartbeatRetryMs = 100;

/** The reason of the replies stopped because the process lease ran out. */
export function leaseLostError(): WorkerError {
  return new WorkerError("lease_lost", "the worker's process lease ran out (no heartbeat got through in time)");
}

export interface LeaseHooks {
  /** The lease was lost: stop every reply in flight with err. */
  lost(err: WorkerError): void;
  /** A lease was taken or extended: the claim loop may wait for it. */
  taken(): void;
  /** Check the prompts in flight (after a heartbeat that extended the lease), on the worker's pool: a slow check holds up no heartbeat. */
  check(): Promise<void>;
}

export class ProcessLease {
  /** The lease's end by this process's clock (ms). */
  private until = 0;
  private lost = false;
  /** Grows each time the lease is lost: a claim made under an older epoch does not run. */
  private epoch = 0;
  private starting = true;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private checking = false;

  constructor(
    /** On a pool of its own: a heartbeat never waits for a connection behind batches or reads. */
    private readonly sql: Sql,
    private readonly s: Settings,
    private readonly hooks: LeaseHooks,
  ) {}

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops heartbeating (the lease runs out in PostgreSQL on its own) once the call in flight, if any, answers. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.watchdog);
    this.wake?.();
    await this.loop;
  }

  /**
   * Checks the prompts in flight now, not at the next heartbeat: the
   * listener calls it when it listens again, since a cancel notified while
   * it was away was not heard. Before the first heartbeat, or once stopped,
   * it does nothing (there is nothing in flight to check).
   */
  checkNow(): void {
    if (!this.starting && !this.stopped) this.checkInFlight();
  }

  /** Whether the lease is live by this process's clock, and its epoch. */
  live(): { epoch: number; live: boolean } {
    return { epoch: this.epoch, live: !this.lost && Date.now() < this.until };
  }

  /** Whether the lease of epoch is still live: a claim made under it may run its prompts. */
  held(epoch: number): boolean {
    const l = this.live();
    return l.live && l.epoch === epoch;
  }

  private async run(): Promise<void> {
    const leaseMs = this.s.leaseSeconds * 1000;
    let retryMs = heartbeatRetryMs;
    while (!this.stopped) {
      const sent = Date.now();
      let wait = this.s.heartbeatMs;
      try {
        // A later answer is of no use: the lease ran out meanwhile.
        const live = await this.sql.workerHeartbeat(this.s.workerId, this.s.leaseSeconds, this.starting, Math.min(this.s.callTimeoutMs, leaseMs));
        retryMs = heartbeatRetryMs;
        if (!live && !this.starting) {
          this.s.logger.warn("the worker's process lease had run out: its replies in flight are stopped", { worker: this.s.workerId });
          this.lose();
        } else if (!this.starting) {
          this.checkInFlight();
        }
        this.taken(sent + leaseMs);
        this.starting = false;
      } catch (err) {
        if (this.stopped) return;
        wait = retryMs;
        retryMs = Math.min(retryMs * 2, Math.max(heartbeatRetryMs, this.s.heartbeatMs));
        this.s.logger.warn("worker heartbeat failed", { worker: this.s.workerId, err: messageOf(err), retryInMs: wait });
      }
      await this.sleep(wait);
      // Once the lease lapsed here, the next heartbeat lets go of what the
      // old one held: this process stopped those replies.
      if (this.lost) this.starting = true;
    }
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      this.timer = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(self.timer);
        self.wake = undefined;
        resolve();
      }
      this.wake = done;
    });
  }

  /** A heartbeat got through: the lease lasts until `until` by this process's clock. */
  private taken(until: number): void {
    this.until = until;
    this.lost = false;
    clearTimeout(this.watchdog);
    if (!this.stopped) this.watchdog = setTimeout(() => this.lapsed(), Math.max(0, until - Date.now()));
    this.hooks.taken();
  }

  /** The lease's end passed: unless a heartbeat extended it meanwhile, every reply in flight stops. */
  private lapsed(): void {
    if (this.lost || this.stopped) return;
    const left = this.until - Date.now();
    if (left > 0) {
      // A timer may fire a millisecond or so before Date.now() reaches
      // its end (timers run on the monotonic clock, rounded): wait out
      // the rest, or the lease would never be seen to lapse. (A heartbeat
      // that extended the lease cleared this timer and set its own.)
      this.watchdog = setTimeout(() => this.lapsed(), left + 1);
      return;
    }
    this.s.logger.warn("the worker's process lease ran out: no heartbeat got through; its replies in flight are stopped", {
      worker: this.s.workerId,
      leaseSeconds: this.s.leaseSeconds,
    });
    this.lost = true;
    this.lose();
  }

  /** Stops every reply in flight, and those of claims under way (a new epoch). */
  private lose(): void {
    this.epoch++;
    this.hooks.lost(leaseLostError());
  }

  private checkInFlight(): void {
    if (this.checking) return;
    this.checking = true;
    this.hooks
      .check()
      .catch((err: unknown) => {
        if (!this.stopped) this.s.logger.warn("check the prompts in flight", { err: messageOf(err) });
      })
      .finally(() => (this.checking = false));
  }
}
