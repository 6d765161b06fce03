-- +goose Up

-- OpenAI's Responses API takes input files and images (docs/openai.md):
-- convo.send_after takes a last argument, p_file_ids (DEFAULT '{}', so
-- that calls without it mean what they meant), the files the user
-- message holds. A function's signature cannot change with CREATE OR
-- REPLACE: the old one is dropped here, and db/functions/client_api.sql
-- holds the current definition (applied after the migrations on every
-- start).
DROP FUNCTION IF EXISTS convo.send_after(text, uuid, uuid, text, jsonb);

-- Workers report a reply's token usage (docs/worker-api.md):
-- convo.complete_prompt takes usage (DEFAULT NULL), and _finish_prompt
-- p_usage, kept in the promptCompleted event.
DROP FUNCTION IF EXISTS convo.complete_prompt(uuid);
DROP FUNCTION IF EXISTS convo._finish_prompt(uuid, text, text);

-- +goose Down
-- The functions as the previous version has them (db/functions/ at that
-- version replaces them on its start; a database migrated down and used
-- before that, as the migration tests do, needs them now).
DROP FUNCTION IF EXISTS convo.append_messages(text, uuid, jsonb);
DROP FUNCTION IF EXISTS convo.delete_message(text, uuid, uuid);
DROP FUNCTION IF EXISTS convo.complete_prompt(uuid, jsonb);
DROP FUNCTION IF EXISTS convo._finish_prompt(uuid, text, text, jsonb);
DROP FUNCTION IF EXISTS convo._usage_json(jsonb, text);
DROP FUNCTION IF EXISTS convo.send_after(text, uuid, uuid, text, jsonb, uuid[]);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._finish_prompt(p_prompt_id uuid, p_status text, p_error text) RETURNS convo.prompts
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt  convo.prompts;
    v_message convo.messages;
    v_block   convo.blocks;
    v_kind    text;
BEGIN
    PERFORM convo._fail_open_calls(p_prompt_id, 'prompt ' || p_status || ' before the tool call finished');
    FOR v_block IN
        SELECT * FROM convo.blocks b
         WHERE b.prompt_id = p_prompt_id AND b.status = 'streaming'
         ORDER BY b.position
    LOOP
        PERFORM convo._end_block(v_block, NULL, false);
    END LOOP;

    UPDATE convo.prompts
       SET status = p_status, error = p_error, ended_at = now(), lease_expires_at = NULL, waiting = false
     WHERE id = p_prompt_id
    RETURNING * INTO v_prompt;
    v_kind := CASE p_status WHEN 'completed' THEN 'promptCompleted'
                            WHEN 'failed' THEN 'promptFailed'
                            ELSE 'promptCancelled' END;
    PERFORM convo._append_event(v_prompt.conversation_id, v_kind,
        convo._object(jsonb_build_object('prompt', convo._prompt_json(v_prompt), 'error', p_error)),
        v_prompt.id);

    UPDATE convo.messages SET status = p_status, updated_at = now()
     WHERE id = v_prompt.message_id
    RETURNING * INTO v_message;
    PERFORM convo._append_event(v_prompt.conversation_id, 'messageUpdated',
        jsonb_build_object('message', convo._message_json(v_message)), v_prompt.id);

    PERFORM convo._refresh_active_prompt(v_prompt.conversation_id);
    RETURN v_prompt;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.complete_prompt(prompt_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM convo._running_prompt(complete_prompt.prompt_id, 'complete_prompt');
    PERFORM convo._finish_prompt(complete_prompt.prompt_id, 'completed', NULL);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.send_after(p_owner_id text, p_conversation_id uuid, p_after_message_id uuid,
                                            p_text text, p_model_config jsonb)
RETURNS TABLE (user_message_id uuid, prompt_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv  convo.conversations;
    v_after convo.messages;
    v_next  uuid;
BEGIN
    PERFORM convo._check_owner(p_owner_id, p_conversation_id, 'send_after');
    PERFORM convo._check_prompt_quota(p_owner_id, 1, 'send_after');
    v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'send_after');
    SELECT * INTO v_after FROM convo.messages m WHERE m.conversation_id = v_conv.id AND m.id = p_after_message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'send_after: message % is not a message of conversation %', p_after_message_id, v_conv.id
            USING ERRCODE = 'CV001';
    END IF;
    IF NOT v_after.on_active_path THEN
        PERFORM convo.switch_branch(p_owner_id, v_conv.id, v_after.id);
    END IF;
    -- Positions grow down every path: the first user message of the path
    -- after the reply is the one that follows it (past the other reply
    -- of a comparison).
    SELECT m.id INTO v_next FROM convo.messages m
     WHERE m.conversation_id = v_conv.id AND m.on_active_path AND m.role = 'user' AND m.position > v_after.position
     ORDER BY m.position LIMIT 1;
    IF v_next IS NULL THEN
        RETURN QUERY SELECT s.user_message_id, s.prompt_ids[1]
          FROM convo.send_message(p_owner_id, v_conv.id, p_text, jsonb_build_array(coalesce(p_model_config, '{}')),
                                  v_after.id) s;
    ELSE
        RETURN QUERY SELECT e.user_message_id, e.prompt_id
          FROM convo.edit_message(p_owner_id, v_conv.id, v_next, p_text, p_model_config) e;
    END IF;
END;
$$;
-- +goose StatementEnd
