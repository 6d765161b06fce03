-- name: PromptCancel :one
-- Cancels the prompt when it belongs to a conversation of owner_id. Returns
-- no row for an unknown or foreign prompt; false when it was already
-- cancelled.
SELECT convo.cancel_prompt(p.id) AS cancelled
  FROM convo.prompts p
  JOIN convo.conversations c ON c.id = p.conversation_id
 WHERE p.id = @prompt_id::uuid AND c.owner_id = @owner_id::text;

-- name: PromptExpireLeases :one
SELECT convo.expire_leases()::int AS failed;
