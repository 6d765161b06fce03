-- The client API (what the server calls for its users' requests): share
-- links (docs/api.md, "Share links"), made by a conversation's owner or a
-- participant (create_share), listed (list_shares), revoked by their
-- creator or the owner (revoke_share), and resolved from a token's hash
-- alone, with no user (share_conversation).
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), in the order of
-- db.FunctionFiles, so a change to a function is an edit here. See
-- db/README.md.

-- _share_json is a share as the API's Share message in proto3 JSON. The
-- token's hash is never in it.
CREATE OR REPLACE FUNCTION convo._share_json(s convo.shares) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'id', s.id,
        'conversationId', s.conversation_id,
        'createdBy', s.created_by,
        'leafMessageId', s.leaf_message_id,
        'mode', s.mode,
        'includeTools', s.include_tools,
        'expiresAt', convo._ts(s.expires_at),
        'revokedAt', convo._ts(s.revoked_at),
        'createdAt', convo._ts(s.created_at)))
$$;

-- create_share makes a share link of the conversation for p_user_id (its
-- owner or a participant) and returns it. p_leaf: the message the share
-- ends at (a message of the conversation), NULL for the active leaf.
-- p_mode: 'snapshot' or 'live'. p_expires_at: NULL (until revoked) or a
-- time after now and at most 366 days ahead. p_token_hash: sha256 of the
-- token, 32 bytes. CV001 for a conversation the caller has no role in, or
-- a leaf that is not a message of it; CV005 for a viewer; CV003 for a
-- malformed mode, expiry or hash, or a snapshot of a conversation with no
-- message; CV004 when the conversation has 100 shares in force (neither
-- revoked nor expired). Event: shareCreated.
CREATE OR REPLACE FUNCTION convo.create_share(
    p_user_id text, p_conversation_id uuid, p_leaf uuid, p_mode text, p_include_tools boolean,
    p_expires_at timestamptz, p_token_hash bytea
) RETURNS convo.shares
LANGUAGE plpgsql AS $$
DECLARE
    v_conv  convo.conversations;
    v_leaf  uuid := p_leaf;
    v_share convo.shares;
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('snapshot', 'live') THEN
        RAISE EXCEPTION 'create_share: mode must be snapshot or live, got %', coalesce(p_mode, 'none')
            USING ERRCODE = 'CV003';
    END IF;
    IF p_token_hash IS NULL OR octet_length(p_token_hash) <> 32 THEN
        RAISE EXCEPTION 'create_share: token hash must be 32 bytes (sha256)' USING ERRCODE = 'CV003';
    END IF;
    IF p_expires_at IS NOT NULL AND p_expires_at <= now() THEN
        RAISE EXCEPTION 'create_share: expiresAt must be in the future, got %', convo._ts(p_expires_at)
            USING ERRCODE = 'CV003';
    END IF;
    IF p_expires_at IS NOT NULL AND p_expires_at > now() + interval '366 days' THEN
        RAISE EXCEPTION 'create_share: expiresAt must be at most 366 days ahead, got %', convo._ts(p_expires_at)
            USING ERRCODE = 'CV003';
    END IF;
    v_conv := convo._conversation_as(p_user_id, p_conversation_id, 'create_share', 'participant');
    IF v_leaf IS NULL THEN
        v_leaf := convo._active_leaf(v_conv.id);
        IF v_leaf IS NULL AND p_mode = 'snapshot' THEN
            RAISE EXCEPTION 'create_share: conversation % has no message to share', v_conv.id
                USING ERRCODE = 'CV003';
        END IF;
    ELSIF NOT EXISTS (SELECT 1 FROM convo.messages m WHERE m.id = v_leaf AND m.conversation_id = v_conv.id) THEN
        RAISE EXCEPTION 'create_share: leafMessageId: message % does not exist in conversation %', v_leaf, v_conv.id
            USING ERRCODE = 'CV001';
    END IF;
    IF (SELECT count(*) FROM convo.shares s
         WHERE s.conversation_id = v_conv.id AND s.revoked_at IS NULL
           AND (s.expires_at IS NULL OR s.expires_at > now())) >= 100 THEN
        RAISE EXCEPTION 'create_share: conversation % has 100 shares in force, the most it may (revoke one first)', v_conv.id
            USING ERRCODE = 'CV004';
    END IF;
    INSERT INTO convo.shares AS s (conversation_id, created_by, leaf_message_id, mode, include_tools, expires_at, token_hash)
    VALUES (v_conv.id, p_user_id, v_leaf, p_mode, coalesce(p_include_tools, false), p_expires_at, p_token_hash)
    RETURNING s.* INTO v_share;
    PERFORM convo._append_event(v_conv.id, 'shareCreated', jsonb_build_object('share', convo._share_json(v_share)));
    RETURN v_share;
END;
$$;

-- list_shares is the conversation's shares, newest first, revoked and
-- expired ones too, for its owner and participants. CV001 for a
-- conversation the caller has no role in; CV005 for a viewer.
CREATE OR REPLACE FUNCTION convo.list_shares(p_user_id text, p_conversation_id uuid) RETURNS SETOF convo.shares
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM convo._check_role(convo.member_role(p_user_id, p_conversation_id), p_conversation_id,
                              'list_shares', 'participant');
    RETURN QUERY SELECT s.* FROM convo.shares s WHERE s.conversation_id = p_conversation_id
                  ORDER BY s.created_at DESC, s.id;
END;
$$;

-- revoke_share ends the share p_share_id now and returns it: its creator
-- or the conversation's owner may. A share already revoked is returned as
-- it is (no second event). CV001 for a share that does not exist or of a
-- conversation the caller has no role in; CV005 for another member.
-- Event: shareRevoked, on which every server ends the share's open
-- streams (stream.Hub).
CREATE OR REPLACE FUNCTION convo.revoke_share(p_user_id text, p_share_id uuid) RETURNS convo.shares
LANGUAGE plpgsql AS $$
DECLARE
    v_share convo.shares;
    v_conv  convo.conversations;
BEGIN
    SELECT s.* INTO v_share FROM convo.shares s WHERE s.id = p_share_id;
    IF NOT FOUND OR convo.member_role(p_user_id, v_share.conversation_id) IS NULL THEN
        RAISE EXCEPTION 'revoke_share: share % does not exist', p_share_id USING ERRCODE = 'CV001';
    END IF;
    v_conv := convo._conversation_as(p_user_id, v_share.conversation_id, 'revoke_share',
                                     CASE WHEN v_share.created_by = p_user_id THEN 'viewer' ELSE 'owner' END);
    UPDATE convo.shares s SET revoked_at = now()
     WHERE s.id = p_share_id AND s.revoked_at IS NULL
    RETURNING s.* INTO v_share;
    IF NOT FOUND THEN
        SELECT s.* INTO v_share FROM convo.shares s WHERE s.id = p_share_id;
        RETURN v_share;
    END IF;
    PERFORM convo._append_event(v_conv.id, 'shareRevoked',
        jsonb_build_object('shareId', v_share.id, 'revokedBy', p_user_id));
    RETURN v_share;
END;
$$;

-- share_conversation is the share whose token hashes to p_token_hash,
-- when it is in force (not revoked, not expired). CV001 "share does not
-- exist" otherwise: revoked, expired and unknown answer alike, so a token
-- tells nothing of a share it no longer opens.
CREATE OR REPLACE FUNCTION convo.share_conversation(p_token_hash bytea) RETURNS convo.shares
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_share convo.shares;
BEGIN
    SELECT s.* INTO v_share FROM convo.shares s
     WHERE s.token_hash = p_token_hash AND s.revoked_at IS NULL
       AND (s.expires_at IS NULL OR s.expires_at > now());
    IF NOT FOUND THEN
        RAISE EXCEPTION 'share does not exist' USING ERRCODE = 'CV001';
    END IF;
    RETURN v_share;
END;
$$;

-- _shared_block_json is block b as a share's reader sees it: as
-- _block_json makes it, but, unless p_include_tools, a tool block's
-- (tool_use, tool_result, or any with a tool call) content and metadata
-- blanked and its tool call's input, output and error left out (its name
-- and status stay).
CREATE OR REPLACE FUNCTION convo._shared_block_json(b convo.blocks, p_include_tools boolean) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN p_include_tools OR NOT (b.block_type IN ('tool_use', 'tool_result') OR j ? 'toolCall') THEN j
        ELSE (j - 'content') || jsonb_build_object('metadata', '{}'::jsonb)
             || CASE WHEN j ? 'toolCall'
                     THEN jsonb_build_object('toolCall', (j->'toolCall') - 'input' - 'output' - 'error')
                     ELSE '{}' END
    END
      FROM convo._block_json(b) j
$$;

-- shared_conversation is what the share whose token hashes to
-- p_token_hash shows, as the API's GetSharedConversationResponse in
-- proto3 JSON: the share (without its creator), the conversation (id,
-- title, times), its seq, and the messages with their blocks: for a
-- snapshot share the path from the root to the share's leaf (what was
-- written after it never shows), for a live share the active path now.
-- At most the last 1000 messages of the path (older: true when more
-- precede them). Messages carry no sender id and no feedback; tool
-- blocks are blanked unless the share includes tools
-- (_shared_block_json). CV001 "share does not exist" as
-- share_conversation.
CREATE OR REPLACE FUNCTION convo.shared_conversation(p_token_hash bytea) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_share convo.shares := convo.share_conversation(p_token_hash);
    v_conv  convo.conversations;
    v_ids   uuid[];
    v_total integer;
BEGIN
    SELECT c.* INTO v_conv FROM convo.conversations c WHERE c.id = v_share.conversation_id;
    IF v_share.mode = 'snapshot' THEN
        SELECT array_agg(p.id) INTO v_ids FROM convo._path(v_share.leaf_message_id) p(id);
    ELSE
        SELECT array_agg(m.id) INTO v_ids FROM convo.messages m
         WHERE m.conversation_id = v_conv.id AND m.on_active_path;
    END IF;
    v_total := coalesce(cardinality(v_ids), 0);
    IF v_total > 1000 THEN
        SELECT array_agg(t.id) INTO v_ids
          FROM (SELECT m.id FROM convo.messages m WHERE m.id = ANY (v_ids) ORDER BY m.position DESC LIMIT 1000) t;
    END IF;
    RETURN jsonb_build_object(
        'share', convo._share_json(v_share) - 'createdBy',
        'conversation', convo._conversation_json(v_conv) - 'sendPolicy' - 'activePromptId',
        'seq', v_conv.last_seq::text,
        'older', v_total > 1000,
        'messages', coalesce((
            SELECT jsonb_agg((convo._message_json(m) - 'senderId' - 'feedback')
                             || jsonb_build_object('blocks', coalesce((
                                    SELECT jsonb_agg(convo._shared_block_json(b, v_share.include_tools) ORDER BY b.position)
                                      FROM convo.blocks b WHERE b.message_id = m.id), '[]'))
                             ORDER BY m.position)
              FROM convo.messages m
             WHERE m.id = ANY (v_ids)), '[]'));
END;
$$;

-- fork_share copies what the share whose token hashes to p_token_hash
-- shows into a new conversation of p_user_id ("continue this
-- conversation") and returns its id. Copied: the chain from the root to
-- the share's leaf (snapshot) or to the active leaf (live) along parent
-- links, each message's role, status and blocks' type, content and
-- metadata, as the share shows them (tool blocks blanked unless it
-- includes tools). Left out: a comparison's other reply, messages still
-- being written (pending or processing) and every message after the
-- first of them, file blocks (a file is its uploader's: the new owner
-- could not read it), tool calls' rows, feedback, prompts. The title is
-- the original's. The original conversation is not touched. Events (of
-- the new conversation): messageCreated per message, then
-- conversationUpdated. CV001 "share does not exist" as
-- share_conversation; CV003 when nothing is left to copy.
CREATE OR REPLACE FUNCTION convo.fork_share(p_user_id text, p_token_hash bytea) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_share    convo.shares := convo.share_conversation(p_token_hash);
    v_src      convo.conversations;
    v_conv     convo.conversations;
    v_leaf     uuid;
    v_old      convo.messages;
    v_msg      convo.messages;
    v_parent   uuid;
    v_i        bigint := 0;
    v_kinds    text[] := '{}';
    v_payloads jsonb[] := '{}';
BEGIN
    PERFORM convo._check_user_id(p_user_id, 'fork_share: user');
    SELECT c.* INTO v_src FROM convo.conversations c WHERE c.id = v_share.conversation_id;
    v_leaf := CASE v_share.mode WHEN 'snapshot' THEN v_share.leaf_message_id ELSE convo._active_leaf(v_src.id) END;
    INSERT INTO convo.conversations (owner_id, title) VALUES (p_user_id, v_src.title) RETURNING * INTO v_conv;
    FOR v_old IN
        WITH RECURSIVE up AS (
            SELECT m.id, m.parent_id, 0 AS depth FROM convo.messages m WHERE m.id = v_leaf
            UNION ALL
            SELECT p.id, p.parent_id, up.depth + 1 FROM up JOIN convo.messages p ON p.id = up.parent_id
        )
        SELECT m.* FROM up JOIN convo.messages m ON m.id = up.id ORDER BY up.depth DESC
    LOOP
        EXIT WHEN v_old.status IN ('pending', 'processing');
        v_i := v_i + 1;
        INSERT INTO convo.messages (conversation_id, position, role, status, parent_id, sender_id)
        VALUES (v_conv.id, v_i, v_old.role, v_old.status, v_parent, CASE WHEN v_old.role = 'user' THEN p_user_id END)
        RETURNING * INTO v_msg;
        INSERT INTO convo.blocks (conversation_id, message_id, position, block_type, status, content, metadata, ended_at)
        SELECT v_conv.id, v_msg.id, row_number() OVER (ORDER BY b.position) - 1, b.block_type, 'completed',
               CASE WHEN j ? 'content' THEN j->>'content' ELSE '' END, j->'metadata', now()
          FROM convo.blocks b
         CROSS JOIN LATERAL convo._shared_block_json(b, v_share.include_tools) j
         WHERE b.message_id = v_old.id AND b.block_type <> 'file';
        v_kinds := v_kinds || 'messageCreated'::text;
        v_payloads := v_payloads || jsonb_build_object('message',
            convo._message_json(v_msg) || jsonb_build_object('blocks', coalesce(
                (SELECT jsonb_agg(convo._block_json(b) ORDER BY b.position) FROM convo.blocks b WHERE b.message_id = v_msg.id),
                '[]')));
        v_parent := v_msg.id;
    END LOOP;
    IF v_i = 0 THEN
        RAISE EXCEPTION 'fork_share: the share shows no message to continue from' USING ERRCODE = 'CV003';
    END IF;
    UPDATE convo.conversations c SET last_message_at = now(), updated_at = now()
     WHERE c.id = v_conv.id
    RETURNING * INTO v_conv;
    v_kinds := v_kinds || 'conversationUpdated'::text;
    v_payloads := v_payloads || jsonb_build_object('conversation', convo._conversation_json(v_conv));
    PERFORM convo._append_events(v_conv.id, v_kinds, v_payloads,
                                 array_fill(NULL::uuid, ARRAY[cardinality(v_kinds)]),
                                 array_fill(NULL::uuid, ARRAY[cardinality(v_kinds)]),
                                 array_fill(NULL::uuid, ARRAY[cardinality(v_kinds)]));
    RETURN v_conv.id;
END;
$$;
