-- name: MessageSend :one
-- Appends a user message and queues its prompt(s); see convo.send_message.
SELECT s.conversation_id::uuid AS conversation_id, s.user_message_id::uuid AS user_message_id,
       s.assistant_message_ids::uuid[] AS assistant_message_ids, s.prompt_ids::uuid[] AS prompt_ids,
       s.comparison_id::uuid AS comparison_id
  FROM convo.send_message(@owner_id::text, sqlc.narg(conversation_id)::uuid, @text::text, @model_configs::jsonb) s;

-- name: MessageListByConversation :many
SELECT m.*, p.id AS prompt_id
  FROM convo.messages m
  LEFT JOIN convo.prompts p ON p.message_id = m.id
 WHERE m.conversation_id = @conversation_id::uuid
 ORDER BY m.position;

-- name: MessageGet :one
-- The message, when its conversation belongs to owner_id.
SELECT m.*, p.id AS prompt_id
  FROM convo.messages m
  JOIN convo.conversations c ON c.id = m.conversation_id
  LEFT JOIN convo.prompts p ON p.message_id = m.id
 WHERE m.id = @id::uuid AND c.owner_id = @owner_id::text;

-- name: MessageSetFeedback :exec
SELECT convo.set_feedback(@owner_id::text, @message_id::uuid, @rating::text, @comment::text);
