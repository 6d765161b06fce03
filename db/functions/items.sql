-- Messages added and deleted without a reply: OpenAI's Conversations API
-- (POST and DELETE /v1/conversations/{id}/items, docs/openai.md), the
-- client API's side. What deleting a message of a tree means is in
-- docs/branches.md ("Deleting a message").
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), so a change to a function is
-- an edit here. See db/README.md.

-- append_messages appends p_items, messages that no reply answers, to the
-- owner's conversation at its active leaf, in order, each below the one
-- before, and returns their ids. p_items is a JSON array of 1 to 20
-- objects {"role": "user" | "assistant", "text": "…", "fileIds": […]}:
-- a user message is written as send_message writes one (its text block,
-- then a file block per file of fileIds, the owner's uploads:
-- _write_user_blocks), an assistant message as a completed reply of one
-- text block that no prompt wrote. A later send answers after them. A
-- conversation without a title takes one as send_message gives it, from
-- the first user message. Events: messageCreated per message (with its
-- blocks), then conversationUpdated.
-- Errors, changing nothing: CV003 items that are not such an array, an
-- item naming another role or field, text that is not a string, a user
-- message that shows nothing and holds no file, an assistant message
-- that shows nothing or holds files (each naming items[i]); CV001 a
-- conversation that is not the owner's, or a file that is not
-- (items[i]: file_ids[j]); CV002 while a reply of the conversation is
-- being written or waits for an answer (a message added then would land
-- below a reply that never saw it).
CREATE OR REPLACE FUNCTION convo.append_messages(p_owner_id text, p_conversation_id uuid, p_items jsonb)
RETURNS uuid[]
LANGUAGE plpgsql AS $$
DECLARE
    v_conv     convo.conversations;
    v_item     jsonb;
    v_i        bigint;
    v_field    text;
    v_role     text;
    v_text     text;
    v_files    uuid[];
    v_parent   uuid;
    v_msg      convo.messages;
    v_ids      uuid[] := '{}';
    v_kinds    text[] := '{}';
    v_payloads jsonb[] := '{}';
    v_title    text;
BEGIN
    IF jsonb_typeof(p_items) IS DISTINCT FROM 'array' OR jsonb_array_length(p_items) NOT BETWEEN 1 AND 20 THEN
        RAISE EXCEPTION 'append_messages: items must be a JSON array of 1 to 20 messages' USING ERRCODE = 'CV003';
    END IF;
    -- Every item is checked before anything is locked or written.
    FOR v_item, v_i IN SELECT e.value, e.n - 1 FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(value, n) LOOP
        v_field := format('append_messages: items[%s]', v_i);
        IF jsonb_typeof(v_item) <> 'object' THEN
            RAISE EXCEPTION '%: must be an object {"role", "text", "fileIds"}', v_field USING ERRCODE = 'CV003';
        END IF;
        SELECT k INTO v_text FROM jsonb_object_keys(v_item) k WHERE k NOT IN ('role', 'text', 'fileIds') LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION '%.%: is not a field of a message (role, text, fileIds)', v_field, left(v_text, 64)
                USING ERRCODE = 'CV003';
        END IF;
        v_role := v_item->>'role';
        IF v_role IS NULL OR v_role NOT IN ('user', 'assistant') THEN
            RAISE EXCEPTION '%.role: must be user or assistant, got %', v_field, coalesce(left(v_item->>'role', 64), 'nothing')
                USING ERRCODE = 'CV003';
        END IF;
        IF v_item ? 'text' AND jsonb_typeof(v_item->'text') <> 'string' THEN
            RAISE EXCEPTION '%.text: must be a string', v_field USING ERRCODE = 'CV003';
        END IF;
        IF v_item ? 'fileIds' AND (jsonb_typeof(v_item->'fileIds') <> 'array'
              OR EXISTS (SELECT 1 FROM jsonb_array_elements(v_item->'fileIds') f
                          WHERE jsonb_typeof(f.value) <> 'string' OR NOT (f.value #>> '{}') ~* convo._uuid_pattern())) THEN
            RAISE EXCEPTION '%.fileIds: must be an array of file ids (UUIDs)', v_field USING ERRCODE = 'CV003';
        END IF;
        v_text := coalesce(v_item->>'text', '');
        IF v_role = 'assistant' AND jsonb_array_length(coalesce(v_item->'fileIds', '[]')) > 0 THEN
            RAISE EXCEPTION '%.fileIds: an assistant message holds no files', v_field USING ERRCODE = 'CV003';
        END IF;
        IF NOT convo._has_visible(v_text) AND jsonb_array_length(coalesce(v_item->'fileIds', '[]')) = 0 THEN
            RAISE EXCEPTION '%.text: must not be empty or only whitespace, control, zero-width, bidi control or blank characters%',
                v_field, CASE v_role WHEN 'user' THEN ' (or the message must hold files)' ELSE '' END USING ERRCODE = 'CV003';
        END IF;
    END LOOP;

    PERFORM convo._check_member(p_owner_id, p_conversation_id, 'append_messages', 'participant');
    v_conv := convo._conversation_as(p_owner_id, p_conversation_id, 'append_messages', 'participant');
    PERFORM convo._check_no_reply_in_flight(v_conv.id, 'append_messages');

    v_parent := convo._active_leaf(v_conv.id);
    FOR v_item, v_i IN SELECT e.value, e.n FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(value, n) LOOP
        v_role := v_item->>'role';
        v_text := coalesce(v_item->>'text', '');
        -- Positions grow down the path: the events appended below move
        -- last_seq past every one of these.
        INSERT INTO convo.messages (conversation_id, position, role, status, parent_id, sender_id)
        VALUES (v_conv.id, v_conv.last_seq + v_i, v_role, 'completed', v_parent,
                CASE WHEN v_role = 'user' THEN p_owner_id END)
        RETURNING * INTO v_msg;
        IF v_role = 'user' THEN
            v_files := ARRAY(SELECT (f.value #>> '{}')::uuid FROM jsonb_array_elements(coalesce(v_item->'fileIds', '[]')) f);
            PERFORM convo._write_user_blocks(p_owner_id, v_msg, v_text, v_files, format('append_messages: items[%s]', v_i - 1));
            IF v_title IS NULL AND v_conv.title = '' THEN
                v_title := convo._title_from_text(v_text);
                IF v_title = '' THEN
                    SELECT convo._title_from_text(b.metadata->>'filename') INTO v_title
                      FROM convo.blocks b WHERE b.message_id = v_msg.id AND b.block_type = 'file' ORDER BY b.position LIMIT 1;
                END IF;
            END IF;
        ELSE
            INSERT INTO convo.blocks (conversation_id, message_id, position, block_type, status, content, ended_at)
            VALUES (v_conv.id, v_msg.id, 0, 'text', 'completed', v_text, now());
        END IF;
        v_kinds := v_kinds || 'messageCreated'::text;
        v_payloads := v_payloads || jsonb_build_object('message',
            convo._message_json(v_msg) || jsonb_build_object('blocks',
                (SELECT jsonb_agg(convo._block_json(b) ORDER BY b.position) FROM convo.blocks b WHERE b.message_id = v_msg.id)));
        v_ids := v_ids || v_msg.id;
        v_parent := v_msg.id;
    END LOOP;

    UPDATE convo.conversations c
       SET title = CASE WHEN c.title = '' THEN coalesce(v_title, '') ELSE c.title END,
           last_message_at = now(),
           updated_at = now()
     WHERE c.id = v_conv.id
    RETURNING * INTO v_conv;
    v_kinds := v_kinds || 'conversationUpdated'::text;
    v_payloads := v_payloads || jsonb_build_object('conversation', convo._conversation_json(v_conv));
    PERFORM convo._append_events(v_conv.id, v_kinds, v_payloads,
                                 array_fill(NULL::uuid, ARRAY[cardinality(v_kinds)]),
                                 array_fill(NULL::uuid, ARRAY[cardinality(v_kinds)]),
                                 array_fill(NULL::uuid, ARRAY[cardinality(v_kinds)]));
    RETURN v_ids;
END;
$$;

-- delete_message deletes message p_message_id of the owner's conversation,
-- a message of its active path, and keeps the rest of the tree: the
-- messages below it (every version of the next turn) hang below its
-- parent instead, so the path goes on from its parent to what followed it
-- (docs/branches.md, "Deleting a message"). Its blocks, files held and
-- tool calls go with it; a reply's prompt too (its OpenAI response is
-- then not found). Event: branchSwitched, its fork the deleted message's
-- parent (none for a first message), its messages the path after it
-- (none when the deleted message ended the path: its parent is the leaf).
-- Errors, changing nothing: CV001 a conversation that is not the owner's,
-- or a message that is not one of it; CV002 a message off the active path
-- (switch to its branch first), one of an A/B comparison or followed by
-- one, and while a reply of the conversation is being written or waits
-- for an answer (the message may be the one it answers, or the reply).
CREATE OR REPLACE FUNCTION convo.delete_message(p_owner_id text, p_conversation_id uuid, p_message_id uuid)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
    v_msg  convo.messages;
    v_leaf uuid;
BEGIN
    v_conv := convo._conversation_as(p_owner_id, p_conversation_id, 'delete_message', 'participant');
    SELECT * INTO v_msg FROM convo.messages m WHERE m.conversation_id = v_conv.id AND m.id = p_message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'delete_message: message % is not a message of conversation %', p_message_id, v_conv.id
            USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._check_no_reply_in_flight(v_conv.id, 'delete_message');
    IF NOT v_msg.on_active_path THEN
        RAISE EXCEPTION 'delete_message: message % is not on the active path of conversation %: switch to its branch first',
            v_msg.id, v_conv.id USING ERRCODE = 'CV002';
    END IF;
    IF v_msg.comparison_id IS NOT NULL
       OR EXISTS (SELECT 1 FROM convo.messages m WHERE m.parent_id = v_msg.id AND m.comparison_id IS NOT NULL) THEN
        RAISE EXCEPTION 'delete_message: message % is one of an A/B comparison, or answered by one: vote on it instead',
            v_msg.id USING ERRCODE = 'CV002';
    END IF;
    v_leaf := convo._active_leaf(v_conv.id);
    IF v_leaf = v_msg.id THEN
        v_leaf := v_msg.parent_id;
    END IF;
    -- The path from the deleted message down is marked off, so that
    -- _change_path finds its parent as the fork and sends what follows.
    UPDATE convo.messages m SET on_active_path = false
     WHERE m.conversation_id = v_conv.id AND m.on_active_path AND m.position >= v_msg.position;
    UPDATE convo.messages m SET parent_id = v_msg.parent_id WHERE m.parent_id = v_msg.id;
    DELETE FROM convo.messages m WHERE m.id = v_msg.id;
    PERFORM convo._change_path(v_conv.id, v_leaf);
END;
$$;
