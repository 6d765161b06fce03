// The worker's LISTEN connection on convo_prompts: "queued:<id>" (or
// "queued:*", one notification for every prompt a transaction queued) wakes
// the claim loop, "cancelled:<id>" stops that prompt at once. It reconnects
// with backoff (100 ms doubling to 5 s) and, after every connect, wakes the
// claim loop: notifications sent while it was away are lost, so the queue
// is looked at again. It pings every pingMs (as the Go runtime's listener
// does): a connection that went silent without a reset (a network that
// drops packets, which TCP notices only after hours) would otherwise
// leave the worker deaf to cancels and new prompts.

import pg from "pg";
import { messageOf } from "./errors.js";
import type { Logger } from "./options.js";

export const promptsChannel = "convo_prompts";

/** How long a ping may go unanswered before the connection is made again. */
const pingTimeoutMs = 5000;

export class Listener {
  private client: pg.Client | undefined;
  private closed = false;
  private retryMs = 100;
  private timer: NodeJS.Timeout | undefined;
  private pinger: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly log: Logger,
    private readonly on: { queued: () => void; cancelled: (promptId: string) => void; connected: () => void },
    private readonly pingMs = 30_000,
  ) {}

  /** Connects; resolves once listening, and throws if the first connect fails. */
  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    const c = new pg.Client({ ...this.config, keepAlive: true });
    c.on("error", (err) => {
      this.log.warn("the LISTEN connection failed; reconnecting", { err: messageOf(err) });
      this.lost(c);
    });
    c.on("end", () => this.lost(c));
    c.on("notification", (n) => {
      if (n.channel !== promptsChannel || !n.payload) return;
      const [kind, id] = n.payload.split(":", 2);
      if (kind === "queued") this.on.queued();
      else if (kind === "cancelled" && id) this.on.cancelled(id);
    });
    this.client = c;
    try {
      await c.connect();
      await c.query(`LISTEN ${promptsChannel}`);
    } catch (err) {
      this.client = undefined;
      c.end().catch(() => {});
      throw err;
    }
    if (this.closed) {
      await c.end().catch(() => {});
      return;
    }
    this.retryMs = 100;
    this.ping(c);
    this.on.connected();
  }

  /** Pings c every pingMs; one unanswered for pingTimeoutMs drops it (and reconnects). */
  private ping(c: pg.Client): void {
    clearInterval(this.pinger);
    let pending = false;
    this.pinger = setInterval(() => {
      if (pending || this.client !== c) return;
      pending = true;
      const deadline = setTimeout(() => {
        this.log.warn("the LISTEN connection stopped answering; reconnecting", { waitedMs: pingTimeoutMs });
        this.lost(c);
      }, pingTimeoutMs);
      c.query("SELECT 1").then(
        () => {
          pending = false;
          clearTimeout(deadline);
        },
        () => clearTimeout(deadline), // its error event reconnects
      );
    }, this.pingMs);
    this.pinger.unref();
  }

  private lost(c: pg.Client): void {
    if (this.client !== c || this.closed) return;
    clearInterval(this.pinger);
    this.client = undefined;
    c.end().catch(() => {});
    this.schedule();
  }

  private schedule(): void {
    if (this.closed || this.timer) return;
    const wait = this.retryMs * (0.75 + Math.random() / 2);
    this.retryMs = Math.min(this.retryMs * 2, 5000);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.connect().catch((err) => {
        this.log.warn("reconnect the LISTEN connection", { err: messageOf(err) });
        this.schedule();
      });
    }, wait);
  }

  /**
   * close ends the connection, waiting at most pingTimeoutMs for the
   * server to see it go: on a connection gone silent, end() would wait
   * for TCP to give up (minutes), holding up the worker's stop. Then the
   * socket is dropped.
   */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    clearInterval(this.pinger);
    const c = this.client;
    this.client = undefined;
    if (!c) return;
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), pingTimeoutMs);
    });
    const ended = await Promise.race([c.end().then(() => "ended" as const, () => "ended" as const), gaveUp]);
    clearTimeout(timer);
    if (ended === "timeout") {
      this.log.warn("the LISTEN connection did not close in time; dropping it", { waitedMs: pingTimeoutMs });
      c.connection.stream.destroy();
    }
  }
}
