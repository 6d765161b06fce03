// Every SQL call of the runtime: the worker API of docs/worker-api.md
// (worker_heartbeat, claim_prompts, write_batch, release_prompt) and the view of
// the model's context (convo.prompt_context). Calls run on a client of the
// pool under a deadline: a call that does not answer in time has its
// connection closed, which PostgreSQL sees as the client gone (the
// transaction, if any, rolls back or has committed), so no call waits
// forever on a dead network.

import type pg from "pg";
import { WorkerError } from "./errors.js";

/** A prompt as claim_prompts returns it. */
export interface ClaimRow {
  prompt_id: string;
  conversation_id: string;
  message_id: string;
  model_config: Record<string, unknown> | null;
  attempts: number;
  /** The prompt has input requests: it paused for input before, and an answer queued it again. */
  resumed: boolean;
  /** The W3C trace context of the request that sent the prompt's message (convo.prompt_trace); null when it had none. */
  trace_context: { traceparent?: string; tracestate?: string } | null;
  /** How long the prompt was queued, by the database's clock. */
  queued_seconds: number;
}

/** One input request of a prompt with its call and its answer (convo.prompt_inputs). */
export interface InputRow {
  tool_call_id: string;
  block_id: string;
  name: string;
  input: unknown;
  tool_call_status: string;
  kind: string;
  request: Record<string, unknown> | null;
  status: string;
  answer: Record<string, unknown> | null;
  answered_at: Date | null;
  expires_at: Date | null;
}

/** A prompt write_batch refused: its first op not applied, and why. */
export interface RefusedRow {
  prompt_id: string;
  op_index: number;
  code: string;
  message: string;
}

/** One block of the model's context (convo.prompt_context), in order. */
export interface ContextRow {
  message_id: string;
  /** The message's position in the conversation (a bigint, as text). */
  message_position: string;
  role: string;
  block_type: string;
  content: string;
  metadata: Record<string, unknown> | null;
  tool_call_id: string | null;
  tool_name: string | null;
  tool_input: unknown;
  tool_status: string | null;
  tool_output: string | null;
  tool_error: string | null;
}

/** The SQLSTATE of a PostgreSQL error, if err is one. */
/** A file of a message of the model's context (convo.prompt_files). */
export interface FileRow {
  message_id: string;
  message_position: string;
  file_position: number;
  file_id: string;
  filename: string;
  media_type: string;
  /** A bigint, as text. */
  size: string;
  sha256: string;
  storage: string;
  blob_id: string;
  chunks: number;
}

export function sqlStateOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/**
 * Whether a failed call may be sent again as it was: the connection failed
 * (the call may or may not have committed; write_batch applies a batch
 * once and an append's seq keeps it once), or PostgreSQL refused the
 * transaction for a reason of its own (a deadlock or serialization failure,
 * a shutdown or restart, too many connections).
 */
export function retryable(err: unknown): boolean {
  const state = sqlStateOf(err);
  if (state === undefined) {
    // No SQLSTATE: the network, a closed connection, our deadline.
    return !(err instanceof WorkerError && err.code !== "database");
  }
  if (state === "57014") return false; // cancelled by statement_timeout
  return ["40", "08", "57", "53"].includes(state.slice(0, 2));
}

/** Runs fn on a client of pool; past timeoutMs the client's connection is closed and the call fails. */
export async function withClient<T>(pool: pg.Pool, timeoutMs: number, what: string, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let client: pg.PoolClient | undefined;
  let released = false;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new WorkerError("database", `${what}: no answer from PostgreSQL within ${timeoutMs} ms`);
      if (client && !released) {
        released = true;
        client.release(err); // closes the connection: the pending query fails
      }
      reject(err);
    }, timeoutMs);
  });
  deadline.catch(() => {});
  try {
    client = await Promise.race([pool.connect(), deadline]);
    if (released) {
      // The deadline passed while connecting.
      client.release();
      throw new WorkerError("database", `${what}: no connection within ${timeoutMs} ms`);
    }
    const c = client;
    try {
      const out = await Promise.race([fn(c), deadline]);
      if (!released) {
        released = true;
        c.release();
      }
      return out;
    } catch (err) {
      if (!released) {
        released = true;
        // A connection that failed is dropped, not put back.
        c.release(sqlStateOf(err) === undefined || retryable(err) ? (err as Error) : undefined);
      }
      throw err;
    }
  } finally {
    clearTimeout(timer);
  }
}

/** A prompt in flight that is no longer the worker's, with its status ('' when no worker, or another, holds it). */
export interface GoneRow {
  prompt_id: string;
  status: string;
}

export class Sql {
  constructor(
    private readonly pool: pg.Pool,
    private readonly timeoutMs: number,
  ) {}

  private async query<R extends pg.QueryResultRow>(what: string, text: string, values: unknown[], timeoutMs = this.timeoutMs): Promise<R[]> {
    return withClient(this.pool, timeoutMs, what, async (c) => (await c.query<R>(text, values)).rows);
  }

  /**
   * Takes (starting: the process's first call, letting go of whatever the
   * name held before) or extends the worker's process lease. False: the
   * lease had run out, and the prompts held under it are lost; a new lease
   * starts all the same. Fails past timeoutMs.
   */
  async workerHeartbeat(worker: string, leaseSeconds: number, starting: boolean, timeoutMs: number): Promise<boolean> {
    const rows = await this.query<{ live: boolean }>(
      "worker heartbeat",
      `SELECT convo.worker_heartbeat($1, $2, $3) AS live`,
      [worker, leaseSeconds, starting],
      timeoutMs,
    );
    return rows[0]?.live === true;
  }

  /**
   * Of the prompts in flight, those no longer the worker's to write (ended,
   * or held by another worker or by none), in one read: what a heartbeat
   * per prompt told a worker, once per interval for the whole process.
   */
  promptsGone(worker: string, promptIds: string[]): Promise<GoneRow[]> {
    return this.query<GoneRow>(
      "check the prompts in flight",
      `SELECT g.prompt_id::text AS prompt_id, g.status
         FROM (SELECT u.id AS prompt_id, coalesce(convo.prompt_status(u.id, $1), '') AS status
                 FROM unnest($2::uuid[]) AS u(id)) g
        WHERE g.status NOT IN ('queued', 'running')`,
      [worker, promptIds],
    );
  }

  /** Up to max claimable prompts, in the fair order; the last reserved of them only for owners who hold none. */
  claimPrompts(worker: string, leaseSeconds: number, max: number, reserved: number): Promise<ClaimRow[]> {
    return this.query<ClaimRow>(
      "claim prompts",
      `SELECT c.prompt_id::text, c.conversation_id::text, c.message_id::text, c.model_config, c.attempts,
              EXISTS (SELECT 1 FROM convo.prompt_inputs(c.prompt_id, $1)) AS resumed,
              t.trace_context, t.queued_seconds
         FROM convo.claim_prompts($1, $2, $3, $4) c
        CROSS JOIN LATERAL convo.prompt_trace(c.prompt_id, $1) t`,
      [worker, leaseSeconds, max, reserved],
    );
  }

  /** One call of write_batch: the prompts it refused, one row each. */
  writeBatch(worker: string, batch: bigint, ops: string, lane: number): Promise<RefusedRow[]> {
    return this.query<RefusedRow>(
      "write a batch",
      `SELECT prompt_id::text, op_index, code, message FROM convo.write_batch($1, $2, $3::jsonb, $4)`,
      [worker, batch.toString(), ops, lane],
    );
  }

  /** The number of the last batch write_batch applied for a worker's lane, if any. */
  async batchMark(worker: string, lane: number): Promise<bigint | undefined> {
    const rows = await this.query<{ batch: string }>(
      "read the batch mark",
      `SELECT batch::text FROM convo.worker_batch_mark($1, $2)`,
      [worker, lane],
    );
    return rows.length > 0 ? BigInt(rows[0].batch) : undefined;
  }

  /** The finished blocks of the messages before the prompt's own, in order (the prompt must be held by worker). */
  context(promptId: string, worker: string): Promise<ContextRow[]> {
    return this.query<ContextRow>(
      "read the conversation",
      `SELECT message_id::text, message_position::text, role, block_type, content, metadata, tool_call_id::text, tool_name,
              tool_input, tool_status, tool_output, tool_error
         FROM convo.worker_context($1, $2)
        ORDER BY message_position, block_position`,
      [promptId, worker],
    );
  }

  /** The prompt's own reply so far (convo.prompt_reply, through convo.worker_reply): its finished blocks, in order. */
  replySoFar(promptId: string, worker: string): Promise<ContextRow[]> {
    return this.query<ContextRow>(
      "read the reply so far",
      `SELECT message_id::text, message_position::text, role, block_type, content, metadata, tool_call_id::text, tool_name,
              tool_input, tool_status, tool_output, tool_error
         FROM convo.worker_reply($1, $2)
        ORDER BY block_position`,
      [promptId, worker],
    );
  }

  /** The files of the messages of the prompt's context (convo.prompt_files), in message then file order. */
  files(promptId: string, worker: string): Promise<FileRow[]> {
    return this.query<FileRow>(
      "read the conversation's files",
      `SELECT message_id::text, message_position::text, file_position, file_id::text, filename, media_type, size::text,
              sha256, storage, blob_id::text, chunks
         FROM convo.prompt_files($1, $2)
        ORDER BY message_position, file_position`,
      [promptId, worker],
    );
  }

  /** Chunk seq (256 KiB, from 0) of a file of the prompt's context (convo.file_chunk). */
  async fileChunk(promptId: string, worker: string, fileId: string, seq: number): Promise<Uint8Array> {
    const rows = await this.query<{ data: Buffer }>("read a file", `SELECT convo.file_chunk($1, $2, $3, $4) AS data`, [
      promptId,
      worker,
      fileId,
      seq,
    ]);
    return new Uint8Array(rows[0].data);
  }

  /** The prompt's input requests with their calls and answers, in the order the calls started. */
  inputs(promptId: string, worker: string): Promise<InputRow[]> {
    return this.query<InputRow>(
      "read the answers",
      `SELECT tool_call_id::text, block_id::text, name, input, tool_call_status, kind, request, status, answer,
              answered_at, expires_at
         FROM convo.prompt_inputs($1, $2)`,
      [promptId, worker],
    );
  }

  /** Whether the prompt is still this worker's to write (extends its prompt lease when it has one; one held under the process lease keeps it). */
  async heartbeat(promptId: string, worker: string): Promise<boolean> {
    const rows = await this.query<{ keep: boolean }>("heartbeat", `SELECT convo.heartbeat($1, $2) AS keep`, [promptId, worker]);
    return rows[0]?.keep === true;
  }

  /** Hands a prompt claimed and not started back to the queue. */
  async release(promptId: string, worker: string): Promise<boolean> {
    const rows = await this.query<{ released: boolean }>(
      "release the prompt",
      `SELECT convo.release_prompt($1, $2) AS released`,
      [promptId, worker],
    );
    return rows[0]?.released === true;
  }

  /** The status (queued, running, completed, failed, cancelled) of a prompt worker holds or held last. */
  async status(promptId: string, worker: string): Promise<string | undefined> {
    const rows = await this.query<{ status: string }>("read the prompt's status", `SELECT convo.prompt_status($1, $2) AS status`, [
      promptId,
      worker,
    ]);
    return rows[0]?.status;
  }
}
