-- What a worker reads of a prompt's conversation, as the tests call it,
-- compiled by sqlc into internal/pgtest/apiq (the Go worker runtime's own
-- are in db/queries/worker/). WorkerContextList reads the view
-- convo.prompt_context of any prompt, on the owner's connection; the
-- others call the functions a worker's connection may call
-- (db/functions/worker_reads.sql), which answer only about a prompt the
-- worker holds.

-- name: WorkerContextList :many
-- The finished blocks of the messages before the prompt's message, in
-- order, that a model sees as context (convo.prompt_context).
SELECT message_id, message_position, role, block_type, content, metadata,
       tool_call_id, tool_name, tool_input, tool_status, tool_output, tool_error
  FROM convo.prompt_context
 WHERE prompt_id = @prompt_id::uuid
 ORDER BY message_position, block_position;

-- name: WorkerContext :many
-- WorkerContextList of a prompt worker holds (convo.worker_context);
-- CV001 otherwise.
SELECT c.message_id, c.message_position, c.role, c.block_type, c.content, c.metadata,
       c.tool_call_id, c.tool_name, c.tool_input, c.tool_status, c.tool_output, c.tool_error
  FROM convo.worker_context(@prompt_id::uuid, @worker::text) c
 ORDER BY c.message_position, c.block_position;

-- name: WorkerReply :many
-- The finished blocks of the prompt's own reply so far, in order
-- (convo.worker_reply: the view convo.prompt_reply of a prompt worker
-- holds; CV001 otherwise): what a worker that resumes a paused prompt
-- gives the model, so the reply goes on where it stopped.
SELECT r.message_id, r.message_position, r.role, r.block_type, r.content, r.metadata,
       r.tool_call_id, r.tool_name, r.tool_input, r.tool_status, r.tool_output, r.tool_error
  FROM convo.worker_reply(@prompt_id::uuid, @worker::text) r
 ORDER BY r.block_position;

-- name: WorkerFiles :many
-- The files held by the messages of the context of a prompt worker holds
-- (convo.prompt_files), in message then file order; CV001 otherwise.
SELECT f.message_id::uuid AS message_id, f.message_position::bigint AS message_position,
       f.file_position::integer AS file_position, f.file_id::uuid AS file_id, f.filename::text AS filename,
       f.media_type::text AS media_type, f.size::bigint AS size, f.sha256::text AS sha256,
       f.storage::text AS storage, f.blob_id::uuid AS blob_id, f.chunks::integer AS chunks
  FROM convo.prompt_files(@prompt_id::uuid, @worker::text) f
 ORDER BY 2, 3;

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
