// Faults against real PostgreSQL: a batch whose answer was lost after it
// committed (sent again, written once), a database restart mid-reply
// (writing resumes, no text lost or doubled), and a worker killed with
// SIGKILL (its prompt is failed by lease expiry).

import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Worker } from "./index.js";
import { blocks, prompt, send, settledAs, testDatabase, waitFor, type TestDatabase } from "./testing/db.js";
import { sleep } from "./testing/models.js";
import { Proxy } from "./testing/proxy.js";

let db: TestDatabase;
let proxy: Proxy;
let worker: Worker | undefined;

beforeEach(async () => {
  db = await testDatabase();
  proxy = await Proxy.start(db.url);
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await proxy.close();
  await db.drop();
});

const words = Array.from({ length: 40 }, (_, i) => `w${i} `);

/** A worker through the proxy whose replies are `words`, one every 20 ms. */
async function serveWords(): Promise<Worker> {
  worker = new Worker({
    connectionString: proxy.url(db.url),
    slots: 2,
    leaseSeconds: 10,
    pollIntervalMs: 200,
    handler: async (job) => {
      for (const w of words) {
        job.reply.text(w);
        await sleep(20, job.signal);
      }
    },
  });
  await worker.start();
  return worker;
}

async function textOf(messageId: string): Promise<string> {
  return (await blocks(db.pool, messageId)).map((b) => b.content).join("");
}

describe("faults", () => {
  it("sends a batch again after its connection broke around the commit, and writes its text once", async () => {
    await serveWords();
    const sent = await send(db.pool, "hi");
    await waitFor("the reply's first words", async () => (await textOf(sent.messageId)).includes("w3 "));
    // The next batch's answer is dropped with its connection once its text
    // is in the database (read directly, not through the proxy).
    let seenBefore = "";
    await proxy.cutAfterCommit(async () => {
      const now = await textOf(sent.messageId);
      const grew = seenBefore !== "" && now.length > seenBefore.length;
      seenBefore = now;
      return grew;
    });
    expect(proxy.cuts).toBe(1);
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(await textOf(sent.messageId)).toBe(words.join(""));
  });

  it("resumes writing after a database restart mid-reply, losing and doubling nothing", async () => {
    await serveWords();
    const a = await send(db.pool, "a", { owner: "a" });
    const b = await send(db.pool, "b", { owner: "b" });
    await waitFor("both replies' first words", async () => (await textOf(a.messageId)).includes("w3 ") && (await textOf(b.messageId)).includes("w3 "));
    await proxy.restart(1000);
    for (const s of [a, b]) {
      expect((await settledAs(db.pool, s.promptId, "completed", "failed")).status).toBe("completed");
      expect(await textOf(s.messageId)).toBe(words.join(""));
    }
    // Still serving, and hearing notifications again.
    const c = await send(db.pool, "c");
    expect((await settledAs(db.pool, c.promptId, "completed", "failed")).status).toBe("completed");
  });

  it("loses the lease of a worker killed with SIGKILL: the prompt fails by lease expiry, the partial reply kept", async () => {
    const child = spawn(process.execPath, [fileURLToPath(new URL("./testing/child-worker.mjs", import.meta.url))], {
      env: { ...process.env, DATABASE_URL: db.url, CONVO_WORKER_ID: "doomed", CONVO_LEASE_SECONDS: "2" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      let out = "";
      child.stdout.on("data", (d) => (out += d));
      await waitFor("the child worker to be ready (is dist built? npm run build)", () => out.includes("ready"));
      const sent = await send(db.pool, "hi");
      await waitFor("the partial reply", async () => (await textOf(sent.messageId)) === "partial ");
      child.kill("SIGKILL");
      // Nobody heartbeats now: past the lease, a claim (or the servers'
      // reaper) fails the prompt.
      const p = await waitFor("the lease to expire", async () => {
        await db.pool.query("SELECT convo.expire_leases()");
        const p = await prompt(db.pool, sent.promptId);
        return p.status !== "running" ? p : undefined;
      });
      expect(p.status).toBe("failed");
      expect(p.error).toMatch(/lease expired: worker doomed stopped heartbeating/);
      expect(await blocks(db.pool, sent.messageId)).toMatchObject([{ type: "text", status: "completed", content: "partial " }]);
    } finally {
      child.kill("SIGKILL");
    }
  });
});
