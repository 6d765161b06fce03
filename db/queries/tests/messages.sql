-- The client API as the tests call it, where they call a function without
-- the Go store (which sends through MessageSendMany, db/queries/messages.sql).

-- name: MessageSend :one
-- Appends a user message and queues its prompt(s); see convo.send_message
-- (parent_message_id: the active leaf the client expects, or NULL;
-- file_ids: the files the message holds).
SELECT s.conversation_id::uuid AS conversation_id, s.user_message_id::uuid AS user_message_id,
       s.assistant_message_ids::uuid[] AS assistant_message_ids, s.prompt_ids::uuid[] AS prompt_ids,
       s.comparison_id::uuid AS comparison_id
  FROM convo.send_message(@owner_id::text, sqlc.narg(conversation_id)::uuid, @text::text, @model_configs::jsonb,
                          sqlc.narg(parent_message_id)::uuid, @file_ids::uuid[]) s;
