-- name: PromptGet :one
-- The prompt, found by its id or by its assistant message's id, when its
-- conversation belongs to owner_id.
SELECT p.*
  FROM convo.prompts p
  JOIN convo.conversations c ON c.id = p.conversation_id
 WHERE c.owner_id = @owner_id::text
   AND (p.id = sqlc.narg(prompt_id)::uuid OR p.message_id = sqlc.narg(message_id)::uuid);

-- name: EventListByPrompt :many
-- Every event of the prompt, in order.
SELECT * FROM convo.events
 WHERE conversation_id = @conversation_id::uuid AND prompt_id = @prompt_id::uuid
 ORDER BY seq;
