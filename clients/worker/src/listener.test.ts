// The LISTEN connection against real PostgreSQL, through a TCP proxy that
// can go silent: a connection that stops answering is made again.

import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Listener } from "./listener.js";
import type { Logger } from "./options.js";
import { testDatabase, waitFor, type TestDatabase } from "./testing/db.js";
import { Proxy } from "./testing/proxy.js";

let db: TestDatabase;
let proxy: Proxy;
let listener: Listener | undefined;

beforeEach(async () => {
  db = await testDatabase();
  proxy = await Proxy.start(db.url);
});

afterEach(async () => {
  await listener?.close();
  listener = undefined;
  await proxy.close();
  await db.drop();
});

const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };

describe("Listener", () => {
  it("reconnects when its connection goes silent, and hears cancels again", async () => {
    const cancelled: string[] = [];
    let connects = 0;
    listener = new Listener(
      { connectionString: proxy.url(db.url) },
      quiet,
      { queued() {}, cancelled: (id) => cancelled.push(id), connected: () => connects++ },
      200,
    );
    await listener.start();
    await db.pool.query("SELECT pg_notify('convo_prompts', 'cancelled:before')");
    await waitFor("the cancel sent before the silence", () => cancelled.includes("before"));

    // The network drops every packet of the LISTEN connection and resets
    // nothing: only a ping that goes unanswered shows it is gone.
    proxy.freeze();
    await waitFor("a cancel heard through a new connection", async () => {
      await db.pool.query("SELECT pg_notify('convo_prompts', 'cancelled:after')");
      return cancelled.includes("after");
    });
    expect(connects).toBeGreaterThanOrEqual(2);
  });

  it("closes in bounded time when its connection has gone silent", async () => {
    listener = new Listener({ connectionString: proxy.url(db.url) }, quiet, { queued() {}, cancelled() {}, connected() {} }, 60_000);
    await listener.start();
    // No ping notices it first (every minute): close() itself must not
    // wait for an answer that never comes (a drain would hang on it).
    proxy.freeze();
    const started = Date.now();
    await listener.close();
    listener = undefined;
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it("keeps a silent connection that answers its pings", async () => {
    let connects = 0;
    let queued = 0;
    listener = new Listener({ connectionString: proxy.url(db.url) }, quiet, { queued: () => queued++, cancelled() {}, connected: () => connects++ }, 50);
    await listener.start();
    const pinged = async () =>
      (await db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = 'SELECT 1' AND datname = current_database()`)).rows[0].n > 0;
    await waitFor("a ping", pinged);
    await db.pool.query("SELECT pg_notify('convo_prompts', 'queued:p')");
    await waitFor("the notification", () => queued > 0);
    expect(connects).toBe(1);
  });
});
