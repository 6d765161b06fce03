-- +goose Up

-- regenerate_reply writes the owner's latest reply again: it queues a new
-- prompt, with a new pending assistant message after the replaced one,
-- that answers the same user message. p_message_id names the reply to
-- replace (NULL: the conversation's latest assistant message); it must be
-- the latest reply, not part of an A/B comparison, and no prompt of the
-- conversation may be unfinished. p_model_config is the new prompt's model
-- configuration (NULL: the replaced prompt's). The replaced reply stays;
-- the worker's context (WorkerContextList) leaves it out. send_message
-- cannot serve here: it always appends a user message. Events:
-- messageCreated (assistant), promptQueued, conversationUpdated. Notifies
-- "convo_prompts" with 'queued:<prompt id>'. Errors: CV001 unknown
-- conversation or reply, CV002 a reply that cannot be regenerated now,
-- CV003 a model configuration that is not a JSON object.
-- +goose StatementBegin
CREATE FUNCTION convo.regenerate_reply(p_owner_id text, p_conversation_id uuid, p_message_id uuid,
                                       p_model_config jsonb)
RETURNS TABLE (message_id uuid, prompt_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv      convo.conversations;
    v_old       convo.messages;
    v_old_model jsonb;
    v_assistant convo.messages;
    v_prompt    convo.prompts;
BEGIN
    IF p_model_config IS NOT NULL AND jsonb_typeof(p_model_config) <> 'object' THEN
        RAISE EXCEPTION 'regenerate_reply: model_config must be a JSON object' USING ERRCODE = 'CV003';
    END IF;
    v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'regenerate_reply');

    SELECT * INTO v_old FROM convo.messages m
     WHERE m.conversation_id = v_conv.id AND m.role = 'assistant'
       AND (p_message_id IS NULL OR m.id = p_message_id)
     ORDER BY m.position DESC LIMIT 1;
    IF NOT FOUND THEN
        IF p_message_id IS NULL THEN
            RAISE EXCEPTION 'regenerate_reply: conversation % has no reply to regenerate', v_conv.id USING ERRCODE = 'CV002';
        END IF;
        RAISE EXCEPTION 'regenerate_reply: message % is not a reply in conversation %', p_message_id, v_conv.id
            USING ERRCODE = 'CV001';
    END IF;
    IF EXISTS (SELECT 1 FROM convo.messages m WHERE m.conversation_id = v_conv.id AND m.position > v_old.position
                  AND (m.role = 'user' OR (m.role = 'assistant' AND m.comparison_id IS NULL))) THEN
        RAISE EXCEPTION 'regenerate_reply: message % is not the latest reply; only the latest can be regenerated', v_old.id
            USING ERRCODE = 'CV002';
    END IF;
    IF v_old.comparison_id IS NOT NULL THEN
        RAISE EXCEPTION 'regenerate_reply: message % is part of an A/B comparison', v_old.id USING ERRCODE = 'CV002';
    END IF;
    IF EXISTS (SELECT 1 FROM convo.prompts p WHERE p.conversation_id = v_conv.id AND p.status IN ('queued', 'running')) THEN
        RAISE EXCEPTION 'regenerate_reply: a reply of conversation % is still being written; stop it first', v_conv.id
            USING ERRCODE = 'CV002';
    END IF;
    SELECT p.model_config INTO v_old_model FROM convo.prompts p WHERE p.message_id = v_old.id;

    INSERT INTO convo.messages (conversation_id, position, role, status)
    VALUES (v_conv.id, v_conv.last_seq + 1, 'assistant', 'pending')
    RETURNING * INTO v_assistant;
    INSERT INTO convo.prompts (conversation_id, message_id, model_config)
    VALUES (v_conv.id, v_assistant.id, coalesce(p_model_config, v_old_model, '{}'))
    RETURNING * INTO v_prompt;
    PERFORM convo._append_event(v_conv.id, 'messageCreated',
        jsonb_build_object('message', convo._message_json(v_assistant)), v_prompt.id);
    PERFORM convo._append_event(v_conv.id, 'promptQueued',
        jsonb_build_object('prompt', convo._prompt_json(v_prompt)), v_prompt.id);
    PERFORM pg_notify('convo_prompts', 'queued:' || v_prompt.id::text);

    UPDATE convo.conversations c
       SET active_prompt_id = v_prompt.id, last_message_at = now(), updated_at = now()
     WHERE c.id = v_conv.id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'conversationUpdated',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));

    RETURN QUERY SELECT v_assistant.id, v_prompt.id;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION convo.regenerate_reply(text, uuid, uuid, jsonb);
