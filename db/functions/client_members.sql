-- The client API (what the server calls for its users' requests): a
-- conversation's members, added (or their role changed) by its owner
-- (add_member) and removed by its owner or by themselves (remove_member).
-- The roles and what each may do are in client_conversations.sql
-- (_conversation_as) and docs/api.md ("Members").
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), in the order of
-- db.FunctionFiles, so a change to a function is an edit here. See
-- db/README.md.

-- _member_json is a member as the API's Member message in proto3 JSON.
CREATE OR REPLACE FUNCTION convo._member_json(m convo.members) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'userId', m.user_id,
        'role', m.role,
        'addedAt', convo._ts(m.added_at),
        'addedBy', m.added_by)
$$;

-- _check_user_id raises CV003, naming p_field, unless p_user_id is a user
-- id as auth gives one (a token's sub): 1 to 200 bytes, no control
-- character. wire.CheckUserID is the same rule.
CREATE OR REPLACE FUNCTION convo._check_user_id(p_user_id text, p_field text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_user_id IS NULL OR p_user_id = '' THEN
        RAISE EXCEPTION '%: must not be empty', p_field USING ERRCODE = 'CV003';
    END IF;
    IF octet_length(p_user_id) > 200 THEN
        RAISE EXCEPTION '%: must be at most 200 bytes, got %', p_field, octet_length(p_user_id) USING ERRCODE = 'CV003';
    END IF;
    IF p_user_id ~ '[\u0001-\u001F\u007F-\u009F]' THEN
        RAISE EXCEPTION '%: must not contain control characters', p_field USING ERRCODE = 'CV003';
    END IF;
END;
$$;

-- add_member makes p_user_id a member of the conversation with p_role
-- ('viewer' or 'participant'), or changes the role of a member already
-- there, and returns the member. Only the owner (p_owner_id) may: CV001
-- for a conversation the caller has no role in, CV005 for a member's
-- call. CV003 for a malformed user id or role, or the owner's own id (the
-- owner is no member). Event: memberAdded (none when the member had that
-- role already).
CREATE OR REPLACE FUNCTION convo.add_member(p_owner_id text, p_conversation_id uuid, p_user_id text, p_role text)
RETURNS convo.members
LANGUAGE plpgsql AS $$
DECLARE
    v_conv   convo.conversations;
    v_member convo.members;
BEGIN
    PERFORM convo._check_user_id(p_user_id, 'add_member: userId');
    IF p_role IS NULL OR p_role NOT IN ('viewer', 'participant') THEN
        RAISE EXCEPTION 'add_member: role must be viewer or participant, got %', coalesce(p_role, 'none')
            USING ERRCODE = 'CV003';
    END IF;
    v_conv := convo._conversation_as(p_owner_id, p_conversation_id, 'add_member', 'owner');
    IF p_user_id = v_conv.owner_id THEN
        RAISE EXCEPTION 'add_member: userId % is the conversation''s owner, who is no member', p_user_id
            USING ERRCODE = 'CV003';
    END IF;
    SELECT * INTO v_member FROM convo.members m WHERE m.conversation_id = v_conv.id AND m.user_id = p_user_id;
    IF FOUND AND v_member.role = p_role THEN
        RETURN v_member;
    END IF;
    INSERT INTO convo.members AS m (conversation_id, user_id, role, added_by)
    VALUES (v_conv.id, p_user_id, p_role, p_owner_id)
    ON CONFLICT (conversation_id, user_id) DO UPDATE SET role = excluded.role
    RETURNING m.* INTO v_member;
    PERFORM convo._append_event(v_conv.id, 'memberAdded', jsonb_build_object('member', convo._member_json(v_member)));
    RETURN v_member;
END;
$$;

-- remove_member removes p_user_id from the conversation's members. The
-- owner (p_caller_id) may remove anyone; a member may remove themself
-- (p_user_id = p_caller_id), whatever their role. CV001 for a
-- conversation the caller has no role in, or a user who is not a member;
-- CV005 for a member removing another; CV003 for a malformed user id or
-- the owner's own. Event: memberRemoved, on which every server ends the
-- removed user's streams of the conversation (stream.Hub).
CREATE OR REPLACE FUNCTION convo.remove_member(p_caller_id text, p_conversation_id uuid, p_user_id text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
BEGIN
    PERFORM convo._check_user_id(p_user_id, 'remove_member: userId');
    v_conv := convo._conversation_as(p_caller_id, p_conversation_id, 'remove_member',
                                     CASE WHEN p_user_id = p_caller_id THEN 'viewer' ELSE 'owner' END);
    IF p_user_id = v_conv.owner_id THEN
        RAISE EXCEPTION 'remove_member: userId % is the conversation''s owner, who is no member (delete the conversation instead)',
            p_user_id USING ERRCODE = 'CV003';
    END IF;
    DELETE FROM convo.members m WHERE m.conversation_id = v_conv.id AND m.user_id = p_user_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'remove_member: user % is not a member of conversation %', p_user_id, v_conv.id
            USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._append_event(v_conv.id, 'memberRemoved',
        jsonb_build_object('userId', p_user_id, 'removedBy', p_caller_id));
END;
$$;
