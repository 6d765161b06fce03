-- +goose Up

-- Members (docs/api.md, "Members"): besides its owner
-- (conversations.owner_id, never a row here), a conversation is shared
-- with other users, each a viewer (reads) or a participant (reads and
-- writes as the owner does, but cannot rename, clear, delete it or change
-- its members). user_id is a user id as auth gives it (a token's sub: 1 to
-- 200 bytes, no control character). The key serves a conversation's list
-- of members and the check of one user's role; members_user_idx serves a
-- user's conversations (ListConversations, search).
CREATE TABLE convo.members (
    conversation_id uuid        NOT NULL REFERENCES convo.conversations (id) ON DELETE CASCADE,
    user_id         text        NOT NULL CHECK (user_id <> '' AND octet_length(user_id) <= 200),
    role            text        NOT NULL CHECK (role IN ('viewer', 'participant')),
    added_at        timestamptz NOT NULL DEFAULT now(),
    added_by        text        NOT NULL,
    PRIMARY KEY (conversation_id, user_id)
);
CREATE INDEX members_user_idx ON convo.members (user_id, conversation_id);

-- Who sent each user message: the owner or a participant. NULL for the
-- messages written before (all the owner's) and for assistant messages.
-- A new column of NULLs rewrites nothing.
ALTER TABLE convo.messages ADD COLUMN sender_id text;

-- Every ownership check of the client functions became a check of the
-- caller's role (db/functions/client_conversations.sql:
-- _conversation_as, _check_member, _may, member_role); add_member and
-- remove_member are new (client_members.sql). The owner-only helpers the
-- previous release's functions call (_owned_conversation, _check_owner,
-- _owned_input) stay, in functions/compat.sql, for one release: a call of
-- the previous release running while this migration commits still finds
-- them.

-- +goose Down
DROP FUNCTION IF EXISTS convo.add_member(text, uuid, text, text);
DROP FUNCTION IF EXISTS convo.remove_member(text, uuid, text);
DROP FUNCTION IF EXISTS convo._member_json(convo.members);
DROP FUNCTION IF EXISTS convo._check_user_id(text, text);
DROP FUNCTION IF EXISTS convo._input_as(text, uuid, text);
DROP FUNCTION IF EXISTS convo._check_member(text, uuid, text, text);
DROP FUNCTION IF EXISTS convo._conversation_as(text, uuid, text, text);
DROP FUNCTION IF EXISTS convo._may(text, uuid, text, text);
DROP FUNCTION IF EXISTS convo._check_role(text, uuid, text, text);
DROP FUNCTION IF EXISTS convo.member_role(text, uuid);
DROP FUNCTION IF EXISTS convo._role_rank(text);
ALTER TABLE convo.messages DROP COLUMN sender_id;
DROP TABLE convo.members;
