-- name: MessageRegenerate :one
-- Queues a new prompt answering the latest reply's user message again;
-- see convo.regenerate_reply.
SELECT r.message_id::uuid AS message_id, r.prompt_id::uuid AS prompt_id
  FROM convo.regenerate_reply(@owner_id::text, @conversation_id::uuid, sqlc.narg(message_id)::uuid,
                              sqlc.narg(model_config)::jsonb) r;
