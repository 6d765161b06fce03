-- Share links (docs/api.md, "Share links"). Each query returns the share
-- as convo._share_json makes it (the shareCreated event's form; no token
-- hash): the functions' row types are not in the schema sqlc reads.

-- name: ShareCreate :one
SELECT convo._share_json(s)::jsonb AS share
  FROM convo.create_share(@caller_id::text, @conversation_id::uuid, sqlc.narg(leaf_message_id)::uuid, @mode::text,
                          @include_tools::boolean, sqlc.narg(expires_at)::timestamptz, @token_hash::bytea) s;

-- name: ShareList :many
SELECT convo._share_json(s)::jsonb AS share
  FROM convo.list_shares(@caller_id::text, @conversation_id::uuid) s;

-- name: ShareRevoke :one
SELECT convo._share_json(s)::jsonb AS share
  FROM convo.revoke_share(@caller_id::text, @share_id::uuid) s;

-- name: ShareByTokenHash :one
-- The share a token opens (convo.share_conversation: CV001 when none is
-- in force).
SELECT convo._share_json(s)::jsonb AS share
  FROM convo.share_conversation(@token_hash::bytea) s;

-- name: SharedConversation :one
-- What a share shows (convo.shared_conversation), as the API's
-- GetSharedConversationResponse in proto3 JSON.
SELECT convo.shared_conversation(@token_hash::bytea)::jsonb AS shared;

-- name: ConversationOwnerOf :one
-- The owner of a conversation, whose reads a share's stream makes.
SELECT c.owner_id FROM convo.conversations c WHERE c.id = @id::uuid;

-- name: ShareFork :one
-- A new conversation of caller_id holding what the share shows
-- (convo.fork_share).
SELECT convo.fork_share(@caller_id::text, @token_hash::bytea)::uuid AS conversation_id;
