-- name: ConversationGet :one
-- The conversation, when it exists and belongs to owner_id.
SELECT * FROM convo.conversations
 WHERE id = @id::uuid AND owner_id = @owner_id::text;

-- name: ConversationCreate :one
SELECT (convo.create_conversation(@owner_id::text, @title::text)).id::uuid AS id;

-- name: ConversationRename :exec
SELECT convo.rename_conversation(@owner_id::text, @id::uuid, @title::text);

-- name: ConversationSetSendPolicy :exec
-- The conversation's send policy ('' for the server's); see
-- convo.set_send_policy.
SELECT convo.set_send_policy(@owner_id::text, @id::uuid, @policy::text);

-- name: ConversationClear :exec
SELECT convo.clear_conversation(@owner_id::text, @id::uuid);

-- name: ConversationDelete :exec
SELECT convo.delete_conversation(@owner_id::text, @id::uuid);

-- name: ConversationList :many
-- A page of the owner's conversations, newest last_message_at first,
-- strictly after the (after_time, after_id) cursor when one is given. The
-- order is total (id breaks ties), so pages never repeat or skip a
-- conversation that does not move.
SELECT * FROM convo.conversations
 WHERE owner_id = @owner_id::text
   AND (sqlc.narg(after_time)::timestamptz IS NULL
        OR (last_message_at, id) < (sqlc.narg(after_time)::timestamptz, sqlc.narg(after_id)::uuid))
 ORDER BY last_message_at DESC, id DESC
 LIMIT @max_rows::int;

-- name: ConversationInsertIfAbsent :execrows
-- Creates an empty, untitled conversation with the given id for owner_id,
-- unless a conversation with that id exists already (whoever owns it): a
-- client may choose the id of a new conversation (an AG-UI thread id).
-- One row: it was created.
INSERT INTO convo.conversations (id, owner_id) VALUES (@id::uuid, @owner_id::text)
ON CONFLICT (id) DO NOTHING;

-- name: ConversationDeleteUntouched :execrows
-- Deletes the owner's conversation when nothing was ever written to it
-- (its event log is empty: every change appends an event), and ends its
-- streams ("<id>:deleted"). A writer holding the conversation's row lock
-- is waited for, and its event keeps the conversation.
WITH deleted AS (
    DELETE FROM convo.conversations
     WHERE id = @id::uuid AND owner_id = @owner_id::text AND last_seq = 0
    RETURNING id
)
SELECT convo._notify_deleted(deleted.id) FROM deleted;
