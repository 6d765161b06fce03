-- name: PromptGet :one
-- The prompt, found by its id or by its assistant message's id, when its
-- conversation user_id has a role in. Not p.*: lease_expires_at is
-- 'infinity' for a prompt held under its worker's process lease, which a
-- time.Time cannot hold (and a trace does not show).
SELECT p.id, p.conversation_id, p.message_id, p.status, p.model_config, p.error,
       p.created_at, p.started_at, p.ended_at
  FROM convo.prompts p
  JOIN convo.conversations c ON c.id = p.conversation_id
 WHERE (c.owner_id = @user_id::text OR EXISTS (SELECT 1 FROM convo.members mm WHERE mm.conversation_id = c.id AND mm.user_id = @user_id::text))
   AND (p.id = sqlc.narg(prompt_id)::uuid OR p.message_id = sqlc.narg(message_id)::uuid);

-- name: EventListByPrompt :many
-- Every event of the prompt, in order.
SELECT * FROM convo.events
 WHERE conversation_id = @conversation_id::uuid AND prompt_id = @prompt_id::uuid
 ORDER BY seq;

-- name: PromptInputMessage :one
-- The user message the prompt's reply answers (the reply's parent, on the
-- active path or not), its text and its file blocks' metadata (a JSON
-- array, in order), when the prompt is owner_id's.
SELECT u.id, u.created_at, convo._message_text(u.id)::text AS text,
       (SELECT coalesce(jsonb_agg(b.metadata ORDER BY b.position), '[]')
          FROM convo.blocks b WHERE b.message_id = u.id AND b.block_type = 'file')::jsonb AS files
  FROM convo.prompts p
  JOIN convo.messages r ON r.id = p.message_id
  JOIN convo.messages u ON u.id = r.parent_id
 WHERE p.id = @prompt_id::uuid AND p.owner_id = @owner_id::text;
