// The tests' PostgreSQL: each test makes its own database from the
// migrated template that `go run ./internal/pgtest/withdb` prepared, and
// drops it at the end. Helpers send messages and read replies back.

import { randomBytes } from "node:crypto";
import pg from "pg";

export interface TestDatabase {
  url: string;
  pool: pg.Pool;
  drop(): Promise<void>;
}

function env(name: string): string {
  const v = process.env[name];
  if (!v) {
    throw new Error(
      `${name} is not set: run these tests against real PostgreSQL with ` +
        "`go run ./internal/pgtest/withdb -- npm test --prefix clients/worker` from the repository's root",
    );
  }
  return v;
}

function withDatabase(adminURL: string, name: string): string {
  const u = new URL(adminURL);
  u.pathname = `/${name}`;
  return u.toString();
}

/** A fresh migrated database, with the per-owner prompt cap off (tests queue many prompts). */
export async function testDatabase(): Promise<TestDatabase> {
  const admin = env("CONVO_TEST_ADMIN_URL");
  const template = env("CONVO_TEST_TEMPLATE");
  const name = `tsworker_${randomBytes(6).toString("hex")}`;
  const adminClient = new pg.Client({ connectionString: admin });
  await adminClient.connect();
  try {
    await adminClient.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
  } finally {
    await adminClient.end();
  }
  const url = withDatabase(admin, name);
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on("error", () => {});
  pool.on("connect", (c) => c.on("error", () => {}));
  await pool.query("UPDATE convo.limits SET max_active_prompts = 0");
  return {
    url,
    pool,
    async drop() {
      await pool.end();
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

export interface Sent {
  conversationId: string;
  promptId: string;
  messageId: string;
}

/** Sends text as owner into a new conversation (or conversationId's), queuing one prompt. */
export async function send(pool: pg.Pool, text: string, opts: { owner?: string; conversationId?: string; modelConfig?: object } = {}): Promise<Sent> {
  const { rows } = await pool.query(
    `SELECT conversation_id::text, assistant_message_ids[1]::text AS message_id, prompt_ids[1]::text AS prompt_id
       FROM convo.send_message($1, $2, $3, $4::jsonb)`,
    [opts.owner ?? "local", opts.conversationId ?? null, text, JSON.stringify([opts.modelConfig ?? {}])],
  );
  return { conversationId: rows[0].conversation_id, promptId: rows[0].prompt_id, messageId: rows[0].message_id };
}

export interface PromptRow {
  status: string;
  error: string | null;
  worker: string | null;
}

export async function prompt(pool: pg.Pool, promptId: string): Promise<PromptRow> {
  const { rows } = await pool.query(`SELECT status, error, worker FROM convo.prompts WHERE id = $1`, [promptId]);
  return rows[0];
}

export interface BlockRow {
  type: string;
  status: string;
  content: string;
  metadata: Record<string, unknown>;
  toolCall?: { name: string; input: unknown; status: string; output: string; error: string | null };
}

/** The blocks of a reply, in order, each with its tool call; the text of a streaming block read from its deltas. */
export async function blocks(pool: pg.Pool, messageId: string): Promise<BlockRow[]> {
  const { rows } = await pool.query(
    `SELECT b.block_type, b.status, b.metadata,
            CASE WHEN b.status = 'streaming'
                 THEN coalesce((SELECT string_agg(e.payload->>'content', '' ORDER BY e.seq) FROM convo.events e
                                 WHERE e.block_id = b.id AND e.kind = 'blockDelta'), '')
                 ELSE b.content END AS content,
            t.name, t.input, t.status AS tool_status, t.output, t.error
       FROM convo.blocks b LEFT JOIN convo.tool_calls t ON t.block_id = b.id
      WHERE b.message_id = $1 ORDER BY b.position`,
    [messageId],
  );
  return rows.map((r) => ({
    type: r.block_type,
    status: r.status,
    content: r.content,
    metadata: r.metadata,
    ...(r.name ? { toolCall: { name: r.name, input: r.input, status: r.tool_status, output: r.output, error: r.error } } : {}),
  }));
}

/** Polls cond every 25 ms until it holds, or fails after timeoutMs saying what was awaited. */
export async function waitFor<T>(what: string, cond: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await cond();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Waits until the prompt has one of the statuses, and returns its row. */
export function settledAs(pool: pg.Pool, promptId: string, ...statuses: string[]): Promise<PromptRow> {
  return waitFor(`prompt ${promptId} to be ${statuses.join(" or ")}`, async () => {
    const p = await prompt(pool, promptId);
    return statuses.includes(p.status) ? p : undefined;
  });
}

/**
 * The prompt's lease runs out and the reaper fails it, for sure: one
 * transaction that first locks the prompt's conversation, as write_batch
 * does (waiting for a batch in flight), then moves the lease into the past
 * and calls expire_leases. Apart, a heartbeat committed between the update
 * and the call would extend the lease again. Without the lock, a batch
 * that locked the conversation and waits for the prompt's row (which the
 * update holds) makes expire_leases skip the prompt (it never waits for a
 * conversation locked by someone else, and takes its own transaction's lock
 * as its own); the batch's next heartbeat then extends the lease and the
 * prompt runs on. Throws unless the prompt ends failed.
 */
export async function expireLease(pool: pg.Pool, promptId: string): Promise<void> {
  const c = await pool.connect();
  let expired: number;
  try {
    await c.query("BEGIN");
    await c.query(
      `SELECT 1 FROM convo.conversations c JOIN convo.prompts p ON p.conversation_id = c.id
        WHERE p.id = $1 FOR NO KEY UPDATE OF c`,
      [promptId],
    );
    await c.query("UPDATE convo.prompts SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [promptId]);
    expired = (await c.query<{ n: number }>("SELECT convo.expire_leases() AS n")).rows[0].n;
    await c.query("COMMIT");
  } catch (err) {
    await c.query("ROLLBACK").catch(() => {});
    throw err;
  } finally {
    c.release();
  }
  const p = await prompt(pool, promptId);
  if (expired !== 1 || p.status !== "failed") {
    throw new Error(`expire_leases failed ${expired} prompts and left prompt ${promptId} ${p.status}: want it failed`);
  }
}
