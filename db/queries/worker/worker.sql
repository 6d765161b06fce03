-- The SQL worker API, as the Go worker runtime (package worker) calls it,
-- compiled by sqlc into worker/internal/wdb, the runtime's alone. Each
-- query is one call of a convo.* function (db/functions/worker_*.sql,
-- batch.sql) that a connection of the worker role may call.

-- name: PromptHeartbeat :one
SELECT convo.heartbeat(@prompt_id::uuid, @worker::text)::bool AS keep_going;

-- name: WorkerHeartbeat :one
-- The process's lease: false when it had run out (the prompts held under
-- it are lost). starting: the process's first call.
SELECT convo.worker_heartbeat(@worker::text, @lease_seconds::int, @starting::bool)::bool AS live;

-- name: WorkerPromptsGone :many
-- Of the prompts a worker process runs, those no longer its own to write
-- (ended, or held by another worker or by none: status ''), with their
-- status: one read per heartbeat interval for the whole process, in place
-- of a heartbeat per prompt, which told the worker the same.
SELECT g.prompt_id::uuid AS prompt_id, g.status::text AS status
  FROM (SELECT u.id AS prompt_id, coalesce(convo.prompt_status(u.id, @worker::text), '') AS status
          FROM unnest(@prompt_ids::uuid[]) AS u(id)) g
 WHERE g.status NOT IN ('queued', 'running');

-- name: PromptFail :exec
SELECT convo.fail_prompt(@prompt_id::uuid, @error::text);

-- name: PromptStatus :one
-- Why a prompt the worker was running is no longer its own (cancelled, or
-- not: a lost lease).
SELECT convo.prompt_status(@prompt_id::uuid, @worker::text)::text AS status;

-- name: PromptRelease :one
SELECT convo.release_prompt(@prompt_id::uuid, @worker::text)::bool AS released;

-- name: PromptClaimMany :many
-- Up to max_prompts claimed prompts, in the order claimed; the last
-- reserved of them only for owners who hold nothing. Without their trace
-- context ('{}') and queue wait (0): PromptClaimManyTraced reads them,
-- for telemetry only, since the read makes a burst's claims a third
-- dearer in PostgreSQL's CPU (docs/performance.md).
SELECT c.prompt_id::uuid AS prompt_id, c.conversation_id::uuid AS conversation_id,
       c.message_id::uuid AS message_id, c.model_config::jsonb AS model_config,
       c.attempts::int AS attempts,
       EXISTS (SELECT 1 FROM convo.prompt_inputs(c.prompt_id, @worker::text)) AS resumed,
       '{}'::jsonb AS trace_context, 0::float8 AS queued_seconds
  FROM convo.claim_prompts(@worker::text, @lease_seconds::int, @max_prompts::int, @reserved::int) c;

-- name: PromptClaimManyTraced :many
-- PromptClaimMany with each prompt's trace context and how long it was
-- queued (convo.prompt_trace).
SELECT c.prompt_id::uuid AS prompt_id, c.conversation_id::uuid AS conversation_id,
       c.message_id::uuid AS message_id, c.model_config::jsonb AS model_config,
       c.attempts::int AS attempts,
       EXISTS (SELECT 1 FROM convo.prompt_inputs(c.prompt_id, @worker::text)) AS resumed,
       coalesce(t.trace_context, '{}')::jsonb AS trace_context, t.queued_seconds::float8 AS queued_seconds
  FROM convo.claim_prompts(@worker::text, @lease_seconds::int, @max_prompts::int, @reserved::int) c
 CROSS JOIN LATERAL convo.prompt_trace(c.prompt_id, @worker::text) t;

-- name: BatchWrite :many
-- One row per refused prompt; see convo.write_batch (db/functions/batch.sql).
SELECT b.prompt_id::uuid AS prompt_id, b.op_index::int AS op_index,
       b.code::text AS code, b.message::text AS message
  FROM convo.write_batch(@worker::text, @batch::bigint, @ops::jsonb, @lane::int) b;

-- name: BatchMark :one
-- The number of the last batch write_batch applied for a worker's lane,
-- so that a worker that starts (or restarts with its name) numbers on
-- from there.
SELECT m.batch::bigint AS batch FROM convo.worker_batch_mark(@worker::text, @lane::int) m;

-- name: WorkerInputs :many
-- PromptInputs of a prompt worker holds, for a worker that resumes it
-- (convo.prompt_inputs); CV001 otherwise. answer is NULL (a nil
-- RawMessage) unless answered or expired; the runtime reads no time.
SELECT i.tool_call_id::uuid AS tool_call_id, i.block_id::uuid AS block_id, i.name::text AS name,
       i.input::jsonb AS input, i.tool_call_status::text AS tool_call_status, i.kind::text AS kind,
       i.request::jsonb AS request, i.status::text AS status, i.answer::jsonb AS answer
  FROM convo.prompt_inputs(@prompt_id::uuid, @worker::text) i;
