-- name: ConversationGet :one
-- The conversation, when it exists and user_id has a role in it (its
-- owner or a member), with that role.
SELECT sqlc.embed(c), (CASE WHEN c.owner_id = @user_id::text THEN 'owner' ELSE m.role END)::text AS role
  FROM convo.conversations c
  LEFT JOIN convo.members m ON m.conversation_id = c.id AND m.user_id = @user_id::text
 WHERE c.id = @id::uuid AND (c.owner_id = @user_id::text OR m.user_id IS NOT NULL);

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
-- A page of the conversations user_id owns or is a member of, each with
-- the user's role, newest last_message_at first, strictly after the
-- (after_time, after_id) cursor when one is given. The order is total (id
-- breaks ties), so pages never repeat or skip a conversation that does
-- not move. Each side reads only its page by its own index (the owner's
-- conversations_owner_recent_idx; the member's members_user_idx), and the
-- two pages are merged.
SELECT u.id, u.owner_id, u.title, u.active_prompt_id, u.last_seq, u.created_at, u.updated_at,
       u.last_message_at, u.role::text AS role
  FROM ((SELECT c.id, c.owner_id, c.title, c.active_prompt_id, c.last_seq, c.created_at, c.updated_at,
                c.last_message_at, 'owner'::text AS role
           FROM convo.conversations c
          WHERE c.owner_id = @user_id::text
            AND (sqlc.narg(after_time)::timestamptz IS NULL
                 OR (c.last_message_at, c.id) < (sqlc.narg(after_time)::timestamptz, sqlc.narg(after_id)::uuid))
          ORDER BY c.last_message_at DESC, c.id DESC
          LIMIT @max_rows::int)
        UNION ALL
        (SELECT c.id, c.owner_id, c.title, c.active_prompt_id, c.last_seq, c.created_at, c.updated_at,
                c.last_message_at, m.role
           FROM convo.members m
           JOIN convo.conversations c ON c.id = m.conversation_id
          WHERE m.user_id = @user_id::text
            AND (sqlc.narg(after_time)::timestamptz IS NULL
                 OR (c.last_message_at, c.id) < (sqlc.narg(after_time)::timestamptz, sqlc.narg(after_id)::uuid))
          ORDER BY c.last_message_at DESC, c.id DESC
          LIMIT @max_rows::int)) u
 ORDER BY u.last_message_at DESC, u.id DESC
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

-- name: MemberAdd :one
SELECT (m).user_id::text AS user_id, (m).role::text AS role, (m).added_at::timestamptz AS added_at,
       (m).added_by::text AS added_by
  FROM convo.add_member(@caller_id::text, @conversation_id::uuid, @user_id::text, @role::text) m;

-- name: MemberRemove :exec
SELECT convo.remove_member(@caller_id::text, @conversation_id::uuid, @user_id::text);

-- name: MemberList :many
-- The conversation's members, when user_id has a role in it: its owner
-- first (a row of its own, added when the conversation was created),
-- then the members in the order they were added. No row: the
-- conversation does not exist or user_id has no role in it.
SELECT u.user_id::text AS user_id, u.role::text AS role, u.added_at::timestamptz AS added_at,
       u.added_by::text AS added_by
  FROM ((SELECT c.owner_id AS user_id, 'owner'::text AS role, c.created_at AS added_at, c.owner_id AS added_by,
                0 AS k
           FROM convo.conversations c
          WHERE c.id = @conversation_id::uuid)
        UNION ALL
        (SELECT m.user_id, m.role, m.added_at, m.added_by, 1
           FROM convo.members m
          WHERE m.conversation_id = @conversation_id::uuid)) u
 WHERE convo.member_role(@user_id::text, @conversation_id::uuid) IS NOT NULL
 ORDER BY u.k, u.added_at, u.user_id;
