-- +goose Up

-- convo.send_message takes a fifth argument, p_parent_message_id (DEFAULT
-- NULL, so that calls with four arguments mean what they meant): the
-- message the client shows as the active leaf, checked under the
-- conversation's lock (SendMessageRequest.parent_message_id). A function's
-- signature cannot change with CREATE OR REPLACE: the old one is dropped
-- here. db/functions/client_api.sql holds the current definition.
DROP FUNCTION convo.send_message(text, uuid, text, jsonb);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.send_message(p_owner_id text, p_conversation_id uuid, p_text text, p_model_configs jsonb,
                                              p_parent_message_id uuid DEFAULT NULL)
RETURNS TABLE (conversation_id uuid, user_message_id uuid, assistant_message_ids uuid[], prompt_ids uuid[],
               comparison_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv       convo.conversations;
    v_leaf       uuid;
    v_user       convo.messages;
    v_assistant  convo.messages;
    v_prompt     convo.prompts;
    v_block      convo.blocks;
    v_config     jsonb;
    v_slot       integer := 0;
    v_comparison uuid;
    v_messages   uuid[] := '{}';
    v_prompts    uuid[] := '{}';
BEGIN
    IF p_text IS NULL OR NOT convo._has_visible(p_text) THEN
        RAISE EXCEPTION 'send_message: text must not be empty or only whitespace, control, zero-width or bidi control characters'
            USING ERRCODE = 'CV003';
    END IF;
    IF jsonb_typeof(p_model_configs) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_model_configs) NOT BETWEEN 1 AND 2
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_model_configs) c WHERE jsonb_typeof(c.value) <> 'object') THEN
        RAISE EXCEPTION 'send_message: model_configs must be a JSON array of one or two objects' USING ERRCODE = 'CV003';
    END IF;
    IF p_parent_message_id IS NOT NULL AND p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'send_message: parentMessageId % names a message of a conversation, and conversationId is not set',
            p_parent_message_id USING ERRCODE = 'CV003';
    END IF;

    -- The quota, before anything is written or locked.
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
    INSERT INTO convo.blocks (conversation_id, message_id, position, block_type, status, content, ended_at)
    VALUES (v_conv.id, v_user.id, 0, 'text', 'completed', p_text, now())
    RETURNING * INTO v_block;
    PERFORM convo._append_event(v_conv.id, 'messageCreated', jsonb_build_object('message',
        convo._message_json(v_user) || jsonb_build_object('blocks', jsonb_build_array(jsonb_build_object(
            'id', v_block.id, 'blockType', v_block.block_type, 'content', v_block.content,
            'metadata', v_block.metadata, 'status', v_block.status, 'position', v_block.position)))));

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

    UPDATE convo.conversations c
       SET title = CASE WHEN c.title = '' THEN convo._title_from_text(p_text) ELSE c.title END,
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
DROP FUNCTION IF EXISTS convo.send_message(text, uuid, text, jsonb, uuid);
