-- +goose Up

-- Share links (docs/api.md, "Share links"): a conversation's owner or a
-- participant makes a link that anyone holding its token may read, with
-- no account: the path from the root to leaf_message_id as it was
-- (mode 'snapshot'), or the conversation's active path as it goes on
-- (mode 'live'). Only sha256(token) is kept (token_hash): the token (128
-- bits or more from the server's crypto/rand) is shown once, to its
-- creator. A share ends when revoked (revoked_at) or at expires_at; the
-- row stays, so a list shows what was shared and until when.
-- leaf_message_id is the active leaf when the share was made, or the one
-- asked for; NULL for a live share of a conversation with no message yet.
CREATE TABLE convo.shares (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    conversation_id uuid        NOT NULL REFERENCES convo.conversations (id) ON DELETE CASCADE,
    created_by      text        NOT NULL,
    leaf_message_id uuid        REFERENCES convo.messages (id) ON DELETE CASCADE,
    mode            text        NOT NULL CHECK (mode IN ('snapshot', 'live')),
    include_tools   boolean     NOT NULL DEFAULT false,
    expires_at      timestamptz,
    revoked_at      timestamptz,
    token_hash      bytea       NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    created_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (mode = 'live' OR leaf_message_id IS NOT NULL)
);
-- A conversation's shares (list_shares, the limit on live shares).
CREATE INDEX shares_conversation_idx ON convo.shares (conversation_id, created_at);

-- create_share, list_shares, revoke_share, share_conversation,
-- shared_conversation, fork_share, _shared_block_json and _share_json
-- are new
-- (db/functions/client_shares.sql).

-- +goose Down
DROP FUNCTION IF EXISTS convo.fork_share(text, bytea);
DROP FUNCTION IF EXISTS convo.shared_conversation(bytea);
DROP FUNCTION IF EXISTS convo._shared_block_json(convo.blocks, boolean);
DROP FUNCTION IF EXISTS convo.share_conversation(bytea);
DROP FUNCTION IF EXISTS convo.revoke_share(text, uuid);
DROP FUNCTION IF EXISTS convo.list_shares(text, uuid);
DROP FUNCTION IF EXISTS convo.create_share(text, uuid, uuid, text, boolean, timestamptz, bytea);
DROP FUNCTION IF EXISTS convo._share_json(convo.shares);
DROP TABLE convo.shares;
