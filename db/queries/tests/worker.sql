-- The SQL worker API as the tests call it (and cmd/bench, a worker of its
-- own), compiled by sqlc into internal/pgtest/apiq. Each query is one call
-- of a convo.* function (db/functions/worker_*.sql, batch.sql), or a read
-- of the tables on the owner's connection. The Go worker runtime has its
-- own queries (db/queries/worker/, package worker/internal/wdb); the calls
-- both make are in both, so that each package is its user's alone.

-- name: PromptClaim :many
-- At most one row: the claimed prompt. resumed: it has input requests (it
-- paused for input before, and an answer queued it again). trace_context
-- ({} when none) and queued_seconds: convo.prompt_trace.
SELECT c.prompt_id::uuid AS prompt_id, c.conversation_id::uuid AS conversation_id,
       c.message_id::uuid AS message_id, c.model_config::jsonb AS model_config,
       c.attempts::int AS attempts,
       EXISTS (SELECT 1 FROM convo.prompt_inputs(c.prompt_id, @worker::text)) AS resumed,
       coalesce(t.trace_context, '{}')::jsonb AS trace_context, t.queued_seconds::float8 AS queued_seconds
  FROM convo.claim_prompt(@worker::text, @lease_seconds::int) c
 CROSS JOIN LATERAL convo.prompt_trace(c.prompt_id, @worker::text) t;

-- name: PromptStart :exec
SELECT convo.start_prompt(@prompt_id::uuid);

-- name: PromptHeartbeat :one
SELECT convo.heartbeat(@prompt_id::uuid, @worker::text)::bool AS keep_going;

-- name: WorkerHeartbeat :one
-- The process's lease: false when it had run out (the prompts held under
-- it are lost). starting: the process's first call.
SELECT convo.worker_heartbeat(@worker::text, @lease_seconds::int, @starting::bool)::bool AS live;

-- name: PromptComplete :exec
SELECT convo.complete_prompt(@prompt_id::uuid);

-- name: PromptFail :exec
SELECT convo.fail_prompt(@prompt_id::uuid, @error::text);

-- name: PromptRelease :one
SELECT convo.release_prompt(@prompt_id::uuid, @worker::text)::bool AS released;

-- name: BlockStart :one
SELECT convo.start_block(@prompt_id::uuid, @block_type::text, @metadata::jsonb)::uuid AS block_id;

-- name: BlockAppend :exec
-- delta_seq (optional) makes a retried call a no-op; see convo.append_block.
SELECT convo.append_block(@block_id::uuid, @delta::text, sqlc.narg(delta_seq)::int);

-- name: BlockEnd :exec
SELECT convo.end_block(@block_id::uuid, sqlc.narg(metadata)::jsonb);

-- name: ToolCallStart :one
SELECT convo.start_tool_call(@block_id::uuid, @name::text, @input::jsonb)::uuid AS tool_call_id;

-- name: ToolCallProgress :exec
SELECT convo.tool_call_progress(@tool_call_id::uuid, @output::text);

-- name: ToolCallComplete :exec
SELECT convo.complete_tool_call(@tool_call_id::uuid, sqlc.narg(output)::text);

-- name: ToolCallFail :exec
SELECT convo.fail_tool_call(@tool_call_id::uuid, @error::text);

-- name: PromptClaimMany :many
-- Up to max_prompts claimed prompts, in the order claimed; the last
-- reserved of them only for owners who hold nothing.
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

-- name: InputRequest :exec
-- Asks a person for input on a started tool call; see convo.request_input.
SELECT convo.request_input(@tool_call_id::uuid, @kind::text, @request::jsonb, sqlc.narg(expires_at)::timestamptz);

-- name: PromptWait :one
-- Parks the prompt until its input requests are answered: true when it
-- parked, false when every request was answered already (go on).
SELECT convo.wait_prompt(@prompt_id::uuid, @worker::text)::bool AS parked;

-- name: PromptInputs :many
-- The input requests of a prompt's tool calls with their answers, read
-- from the tables on the owner's connection (the server's, tests); a
-- worker reads WorkerInputs.
SELECT r.tool_call_id, t.block_id, t.name, t.input, t.status AS tool_call_status, r.kind,
       r.request, r.status, r.answer, r.answered_at, r.expires_at
  FROM convo.input_requests r
  JOIN convo.tool_calls t ON t.id = r.tool_call_id
 WHERE r.prompt_id = @prompt_id::uuid
 ORDER BY t.started_at, t.id;
