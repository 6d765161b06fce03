-- name: ConversationGet :one
-- The conversation, when it exists and belongs to owner_id.
SELECT * FROM convo.conversations
 WHERE id = @id::uuid AND owner_id = @owner_id::text;
