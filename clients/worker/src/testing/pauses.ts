// The tests' view of pauses in the database: a prompt's pause state and
// input requests, the transaction that parked it, and an answer given the
// way the API's AnswerInput RPC gives it.

import type pg from "pg";
import { waitFor } from "./db.js";

export interface InputRequestState {
  kind: string;
  status: string;
  toolCallId: string;
  request: Record<string, unknown>;
  /** The status of the request's tool call. */
  callStatus: string;
  /** The name of the request's tool call. */
  tool: string;
}

export interface PauseState {
  status: string;
  waiting: boolean;
  worker: string | null;
  lease_expires_at: Date | null;
  /** The prompt's input requests, in the order their calls started; null when it has none. */
  requests: InputRequestState[] | null;
}

/** The prompt's pause state as the database holds it. */
export async function pauseState(pool: pg.Pool, promptId: string): Promise<PauseState> {
  const { rows } = await pool.query(
    `SELECT p.status, p.waiting, p.worker, p.lease_expires_at,
            (SELECT json_agg(json_build_object('kind', r.kind, 'status', r.status, 'toolCallId', r.tool_call_id::text,
                                               'request', r.request, 'callStatus', t.status, 'tool', t.name)
                             ORDER BY t.started_at, t.id)
               FROM convo.input_requests r JOIN convo.tool_calls t ON t.id = r.tool_call_id
              WHERE r.prompt_id = p.id) AS requests
       FROM convo.prompts p WHERE p.id = $1`,
    [promptId],
  );
  return rows[0] as PauseState;
}

/** Waits until the prompt is parked (queued and waiting for input), and returns its state. */
export function waitingFor(pool: pg.Pool, promptId: string): Promise<PauseState> {
  return waitFor(`prompt ${promptId} to wait for input`, async () => {
    const s = await pauseState(pool, promptId);
    return s.status === "queued" && s.waiting ? s : undefined;
  });
}

/**
 * The events that parked the prompt's reply in message messageId (its
 * calls started, their requests, the ends of their tool_use blocks, the
 * park), in order, each with the transaction that wrote it.
 */
export async function parkEvents(
  pool: pg.Pool,
  conversationId: string,
  messageId: string,
): Promise<Array<{ kind: string; tx: string; payload: Record<string, unknown> }>> {
  const { rows } = await pool.query(
    `SELECT e.kind, e.xmin::text AS tx, e.payload FROM convo.events e
      WHERE e.conversation_id = $1
        AND (e.kind IN ('toolCallStarted', 'inputRequested', 'promptWaiting')
             OR (e.kind = 'blockEnd' AND e.block_id IN (SELECT id FROM convo.blocks WHERE message_id = $2 AND block_type = 'tool_use')))
      ORDER BY e.seq`,
    [conversationId, messageId],
  );
  return rows;
}

/**
 * Answers the owner's input request on toolCallId with the query the
 * API's AnswerInput RPC runs (db/queries/inputs.sql, InputAnswer), and
 * returns the request as answered (convo.v1.InputRequest's JSON).
 */
export async function answerInput(pool: pg.Pool, toolCallId: string, answer: object, owner = "local"): Promise<Record<string, unknown>> {
  const { rows } = await pool.query(
    `SELECT convo._input_request_json(r)::jsonb AS input_request
       FROM convo.answer_input($1::text, $2::uuid, $3::jsonb) r`,
    [owner, toolCallId, JSON.stringify(answer)],
  );
  return rows[0].input_request;
}

/** The assistant messages of a conversation. */
export async function assistantMessages(pool: pg.Pool, conversationId: string): Promise<string[]> {
  const { rows } = await pool.query(`SELECT id::text FROM convo.messages WHERE conversation_id = $1 AND role = 'assistant' ORDER BY position`, [
    conversationId,
  ]);
  return rows.map((r) => r.id);
}
