-- What the Go worker runtime reads, besides the SQL worker API: the
-- conversation a prompt answers, as context for the model, through the
-- functions a worker's connection may call (db/functions/worker_reads.sql),
-- which answer only about a prompt the worker holds. They read the views
-- every worker runtime reads (db/schema/00015_prompt_context.sql says what
-- they hold), so the Go runtime and the SDKs in other languages give a
-- model the same conversation.

-- name: WorkerReply :many
-- The finished blocks of the prompt's own reply so far, in order
-- (convo.worker_reply: the view convo.prompt_reply of a prompt worker
-- holds; CV001 otherwise): what a worker that resumes a paused prompt
-- gives the model, so the reply goes on where it stopped.
SELECT r.message_id, r.message_position, r.role, r.block_type, r.content, r.metadata,
       r.tool_call_id, r.tool_name, r.tool_input, r.tool_status, r.tool_output, r.tool_error
  FROM convo.worker_reply(@prompt_id::uuid, @worker::text) r
 ORDER BY r.block_position;

-- name: WorkerPromptRead :many
-- WorkerContext and WorkerFiles of a prompt worker holds in one call
-- (convo.worker_prompt_read): kind 'block' rows in context order, then kind
-- 'file' rows in message then file order. A column NULL in the function's
-- row (the other kind's, a block's tool call it has not) is its zero value
-- here: the nil uuid, '', 0, JSON null. CV001 otherwise.
SELECT r.kind::text AS kind, r.message_id::uuid AS message_id, r.message_position::bigint AS message_position,
       coalesce(r.role, '')::text AS role, coalesce(r.block_type, '')::text AS block_type,
       coalesce(r.content, '')::text AS content, coalesce(r.metadata, 'null')::jsonb AS metadata,
       coalesce(r.tool_call_id, '00000000-0000-0000-0000-000000000000')::uuid AS tool_call_id,
       coalesce(r.tool_name, '')::text AS tool_name, coalesce(r.tool_input, 'null')::jsonb AS tool_input,
       coalesce(r.tool_status, '')::text AS tool_status, coalesce(r.tool_output, '')::text AS tool_output,
       coalesce(r.tool_error, '')::text AS tool_error,
       coalesce(r.file_position, 0)::integer AS file_position,
       coalesce(r.file_id, '00000000-0000-0000-0000-000000000000')::uuid AS file_id,
       coalesce(r.filename, '')::text AS filename, coalesce(r.media_type, '')::text AS media_type,
       coalesce(r.size, 0)::bigint AS size, coalesce(r.sha256, '')::text AS sha256,
       coalesce(r.storage, '')::text AS storage,
       coalesce(r.blob_id, '00000000-0000-0000-0000-000000000000')::uuid AS blob_id,
       coalesce(r.chunks, 0)::integer AS chunks
  FROM convo.worker_prompt_read(@prompt_id::uuid, @worker::text) r;

-- name: WorkerFileChunk :one
-- Chunk seq (256 KiB, from 0) of a file of the context of a prompt worker
-- holds (convo.file_chunk); CV001 for a file the context does not hold,
-- CV003 for a file in S3 or a seq out of range.
SELECT convo.file_chunk(@prompt_id::uuid, @worker::text, @file_id::uuid, @seq::integer)::bytea AS data;
