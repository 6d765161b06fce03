-- name: PromptCancel :one
-- Cancels the prompt when it belongs to a conversation of which user_id is
-- the owner or a participant. Returns no row for an unknown prompt or one
-- of a conversation the user has no role in (CV005 when the user only
-- views it); false when it was already cancelled.
SELECT convo.cancel_prompt(p.id) AS cancelled
  FROM convo.prompts p
 WHERE p.id = @prompt_id::uuid AND convo._may(@user_id::text, p.conversation_id, 'cancel_prompt', 'participant');

-- name: PromptExpireLeases :one
SELECT convo.expire_leases()::int AS failed;
