-- +goose Up

-- Messages hold files (docs/files.md): convo.send_message and
-- convo.edit_message take a last argument, p_file_ids (DEFAULT '{}', so
-- that calls without it mean what they meant), the files the user
-- message holds, each a "file" block after its text. A function's
-- signature cannot change with CREATE OR REPLACE: the old ones are
-- dropped here (IF EXISTS: a database migrating from scratch has no
-- edit_message yet; functions/ creates it after the migrations), and db/functions/client_api.sql holds the current
-- definitions (applied after the migrations on every start).
DROP FUNCTION IF EXISTS convo.send_message(text, uuid, text, jsonb, uuid);
DROP FUNCTION IF EXISTS convo.edit_message(text, uuid, uuid, text, jsonb);

-- send_message as this version shipped it (edit_message was never in a
-- migration: functions/ alone defines it).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.send_message(p_owner_id text, p_conversation_id uuid, p_text text, p_model_configs jsonb,
                                              p_parent_message_id uuid DEFAULT NULL, p_file_ids uuid[] DEFAULT '{}')
RETURNS TABLE (conversation_id uuid, user_message_id uuid, assistant_message_ids uuid[], prompt_ids uuid[],
               comparison_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv       convo.conversations;
    v_leaf       uuid;
    v_user       convo.messages;
    v_assistant  convo.messages;
    v_prompt     convo.prompts;
    v_config     jsonb;
    v_slot       integer := 0;
    v_comparison uuid;
    v_messages   uuid[] := '{}';
    v_prompts    uuid[] := '{}';
    v_title      text;
BEGIN
    IF (p_text IS NULL OR NOT convo._has_visible(p_text)) AND cardinality(coalesce(p_file_ids, '{}')) = 0 THEN
        RAISE EXCEPTION 'send_message: text must not be empty or only whitespace, control, zero-width, bidi control or blank (U+2800, ...) characters'
            USING ERRCODE = 'CV003';
    END IF;
    IF jsonb_typeof(p_model_configs) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_model_configs) NOT BETWEEN 1 AND 2
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_model_configs) c WHERE jsonb_typeof(c.value) <> 'object') THEN
        RAISE EXCEPTION 'send_message: model_configs must be a JSON array of one or two objects' USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._json_check(p_model_configs, 'send_message: model_configs');
    IF p_parent_message_id IS NOT NULL AND p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'send_message: parentMessageId % names a message of a conversation, and conversationId is not set',
            p_parent_message_id USING ERRCODE = 'CV003';
    END IF;

    -- The owner, then the quota, before anything is written or locked.
    IF p_conversation_id IS NOT NULL THEN
        PERFORM convo._check_owner(p_owner_id, p_conversation_id, 'send_message');
    END IF;
    PERFORM convo._check_prompt_quota(p_owner_id, jsonb_array_length(p_model_configs), 'send_message');

    IF p_conversation_id IS NULL THEN
        INSERT INTO convo.conversations (owner_id) VALUES (p_owner_id) RETURNING * INTO v_conv;
    ELSE
        v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'send_message');
        IF EXISTS (SELECT 1 FROM convo.prompts p WHERE p.conversation_id = v_conv.id AND p.waiting) THEN
            RAISE EXCEPTION 'send_message: a reply is waiting for an answer: answer or cancel it'
                USING ERRCODE = 'CV002';
        END IF;
    END IF;

    -- The message hangs below the active leaf (below slot "a" of a
    -- comparison), its replies below it; the caller's idea of the leaf is
    -- checked here, under the lock _owned_conversation took.
    v_leaf := convo._active_leaf(v_conv.id);
    IF p_parent_message_id IS NOT NULL AND p_parent_message_id IS DISTINCT FROM v_leaf
       AND NOT EXISTS (SELECT 1 FROM convo.messages b JOIN convo.messages a ON a.comparison_id = b.comparison_id
                        WHERE b.id = p_parent_message_id AND b.conversation_id = v_conv.id AND a.id = v_leaf) THEN
        RAISE EXCEPTION 'send_message: parentMessageId % is not the active leaf of conversation %: the active leaf is now % (the conversation changed since it was read: read it again)',
            p_parent_message_id, v_conv.id, coalesce(v_leaf::text, 'none, the conversation has no messages')
            USING ERRCODE = 'CV002';
    END IF;
    INSERT INTO convo.messages (conversation_id, position, role, status, parent_id)
    VALUES (v_conv.id, v_conv.last_seq + 1, 'user', 'completed', v_leaf)
    RETURNING * INTO v_user;
    PERFORM convo._write_user_blocks(p_owner_id, v_user, p_text, p_file_ids, 'send_message');
    PERFORM convo._append_event(v_conv.id, 'messageCreated', jsonb_build_object('message',
        convo._message_json(v_user) || jsonb_build_object('blocks',
            (SELECT jsonb_agg(convo._block_json(b) ORDER BY b.position) FROM convo.blocks b WHERE b.message_id = v_user.id))));

    -- Create every prompt (and the comparison) first, then announce them,
    -- so each message's first event already carries its comparison.
    FOR v_config IN SELECT c.value FROM jsonb_array_elements(p_model_configs) c LOOP
        v_slot := v_slot + 1;
        INSERT INTO convo.messages (conversation_id, position, role, status, comparison_slot, parent_id)
        VALUES (v_conv.id, v_user.position + v_slot, 'assistant', 'pending',
                CASE WHEN jsonb_array_length(p_model_configs) = 2 THEN chr(ascii('a') + v_slot - 1) END, v_user.id)
        RETURNING * INTO v_assistant;
        INSERT INTO convo.prompts (conversation_id, message_id, model_config)
        VALUES (v_conv.id, v_assistant.id, v_config)
        RETURNING * INTO v_prompt;
        v_messages := v_messages || v_assistant.id;
        v_prompts := v_prompts || v_prompt.id;
    END LOOP;
    IF v_slot = 2 THEN
        INSERT INTO convo.comparisons (conversation_id, user_message_id, prompt_a, prompt_b)
        VALUES (v_conv.id, v_user.id, v_prompts[1], v_prompts[2])
        RETURNING id INTO v_comparison;
        UPDATE convo.messages m SET comparison_id = v_comparison WHERE m.id = ANY (v_messages);
    END IF;
    FOR i IN 1 .. v_slot LOOP
        SELECT * INTO v_assistant FROM convo.messages m WHERE m.id = v_messages[i];
        SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = v_prompts[i];
        PERFORM convo._append_event(v_conv.id, 'messageCreated',
            jsonb_build_object('message', convo._message_json(v_assistant)), v_prompt.id);
        PERFORM convo._append_event(v_conv.id, 'promptQueued',
            jsonb_build_object('prompt', convo._prompt_json(v_prompt)), v_prompt.id);
        PERFORM convo._notify_prompt('queued', v_prompt.id);
    END LOOP;

    v_title := convo._title_from_text(p_text);
    IF v_title = '' THEN
        -- A message of files only: its first file's name.
        SELECT convo._title_from_text(b.metadata->>'filename') INTO v_title
          FROM convo.blocks b WHERE b.message_id = v_user.id AND b.block_type = 'file' ORDER BY b.position LIMIT 1;
    END IF;
    UPDATE convo.conversations c
       SET title = CASE WHEN c.title = '' THEN coalesce(v_title, '') ELSE c.title END,
           active_prompt_id = v_prompts[1],
           last_message_at = now(),
           updated_at = now()
     WHERE c.id = v_conv.id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'conversationUpdated',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));

    RETURN QUERY SELECT v_conv.id, v_user.id, v_messages, v_prompts, v_comparison;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- The functions of the previous version are those of
-- db/functions/client_api.sql at that version; drop these so that it can
-- create them.
DROP FUNCTION IF EXISTS convo.send_message(text, uuid, text, jsonb, uuid, uuid[]);
DROP FUNCTION IF EXISTS convo.edit_message(text, uuid, uuid, text, jsonb, uuid[]);
