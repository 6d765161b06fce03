-- What the Go worker runtime reads, besides the SQL worker API: the
-- conversation a prompt answers, as context for the model. Both read the
-- views every worker runtime reads (db/schema/00015_prompt_context.sql
-- says what they hold), so the Go runtime and the SDKs in other languages
-- give a model the same conversation.

-- name: WorkerContextList :many
-- The finished blocks of the messages before the prompt's message, in
-- order, that a model sees as context (convo.prompt_context).
SELECT message_id, role, block_type, content, metadata,
       tool_call_id, tool_name, tool_input, tool_status, tool_output, tool_error
  FROM convo.prompt_context
 WHERE prompt_id = @prompt_id::uuid
 ORDER BY message_position, block_position;

-- name: WorkerReplyList :many
-- The finished blocks of the prompt's own reply so far, in order
-- (convo.prompt_reply): what a worker that resumes a paused prompt gives
-- the model, so the reply goes on where it stopped.
SELECT message_id, role, block_type, content, metadata,
       tool_call_id, tool_name, tool_input, tool_status, tool_output, tool_error
  FROM convo.prompt_reply
 WHERE prompt_id = @prompt_id::uuid
 ORDER BY block_position;
