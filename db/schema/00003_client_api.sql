-- +goose Up

-- What the Connect API adds on top of the worker API: sending messages, A/B
-- comparisons, feedback, conversation management and search. Like the
-- worker API, every function that changes a conversation locks its row
-- first and appends its event through convo._append_event. Errors use the
-- same SQLSTATEs (CV001 not found — including a conversation of another
-- owner, CV002 illegal state change, CV003 invalid argument).

-- A/B comparisons: two prompts answering one user message.
CREATE TABLE convo.comparisons (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    conversation_id uuid        NOT NULL REFERENCES convo.conversations (id) ON DELETE CASCADE,
    user_message_id uuid        NOT NULL REFERENCES convo.messages (id) ON DELETE CASCADE,
    prompt_a        uuid        NOT NULL REFERENCES convo.prompts (id) ON DELETE CASCADE,
    prompt_b        uuid        NOT NULL REFERENCES convo.prompts (id) ON DELETE CASCADE,
    preference      text        CHECK (preference IN ('a', 'b', 'tie')),
    voted_at        timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX comparisons_conversation_idx ON convo.comparisons (conversation_id, created_at DESC, id DESC);
CREATE INDEX comparisons_recent_idx ON convo.comparisons (created_at DESC, id DESC);

ALTER TABLE convo.messages
    ADD COLUMN feedback_rating  text CHECK (feedback_rating IN ('up', 'down')),
    ADD COLUMN feedback_comment text NOT NULL DEFAULT '' CHECK (length(feedback_comment) <= 2000),
    ADD COLUMN feedback_at      timestamptz,
    ADD COLUMN comparison_id    uuid REFERENCES convo.comparisons (id) ON DELETE SET NULL,
    ADD COLUMN comparison_slot  text CHECK (comparison_slot IN ('a', 'b'));

-- Full-text search over the text blocks of messages (a streaming block's
-- content is empty until it ends, so replies become searchable when their
-- blocks end).
CREATE INDEX blocks_search_idx ON convo.blocks
    USING gin (to_tsvector('english', content)) WHERE block_type = 'text';

-- The message JSON now carries feedback and the comparison.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._message_json(m convo.messages) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT convo._object(jsonb_build_object(
        'id', m.id,
        'conversationId', m.conversation_id,
        'role', m.role,
        'status', m.status,
        'promptId', (SELECT p.id FROM convo.prompts p WHERE p.message_id = m.id),
        'createdAt', convo._ts(m.created_at),
        'updatedAt', convo._ts(m.updated_at),
        'feedback', CASE WHEN m.feedback_rating IS NOT NULL THEN convo._object(jsonb_build_object(
            'rating', 'RATING_' || upper(m.feedback_rating),
            'comment', nullif(m.feedback_comment, ''),
            'createdAt', convo._ts(m.feedback_at))) END,
        'comparisonId', m.comparison_id,
        'comparisonSlot', m.comparison_slot))
$$;
-- +goose StatementEnd

-- _owned_conversation locks the owner's conversation and returns it,
-- raising CV001 when it does not exist or belongs to someone else (the two
-- are indistinguishable on purpose, so ids cannot be probed).
-- +goose StatementBegin
CREATE FUNCTION convo._owned_conversation(p_owner_id text, p_conversation_id uuid, p_action text)
RETURNS convo.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
BEGIN
    SELECT * INTO v_conv FROM convo.conversations c
     WHERE c.id = p_conversation_id AND c.owner_id = p_owner_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: conversation % does not exist', p_action, p_conversation_id USING ERRCODE = 'CV001';
    END IF;
    RETURN v_conv;
END;
$$;
-- +goose StatementEnd

-- _check_title raises CV003 unless the title is 1 to 200 characters (or
-- empty, when allowed).
-- +goose StatementBegin
CREATE FUNCTION convo._check_title(p_title text, p_allow_empty boolean) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_title IS NULL OR (NOT p_allow_empty AND p_title !~ '\S') THEN
        RAISE EXCEPTION 'title must not be empty' USING ERRCODE = 'CV003';
    END IF;
    IF length(p_title) > 200 THEN
        RAISE EXCEPTION 'title must be at most 200 characters, got %', length(p_title) USING ERRCODE = 'CV003';
    END IF;
END;
$$;
-- +goose StatementEnd

-- create_conversation creates an empty conversation for the owner. It has
-- no events yet: its log starts with the first change.
-- +goose StatementBegin
CREATE FUNCTION convo.create_conversation(p_owner_id text, p_title text) RETURNS convo.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
BEGIN
    PERFORM convo._check_title(p_title, true);
    INSERT INTO convo.conversations (owner_id, title) VALUES (p_owner_id, btrim(p_title))
    RETURNING * INTO v_conv;
    RETURN v_conv;
END;
$$;
-- +goose StatementEnd

-- rename_conversation sets the title. Event: conversationUpdated.
-- +goose StatementBegin
CREATE FUNCTION convo.rename_conversation(p_owner_id text, p_conversation_id uuid, p_title text)
RETURNS convo.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
BEGIN
    PERFORM convo._check_title(p_title, false);
    PERFORM convo._owned_conversation(p_owner_id, p_conversation_id, 'rename_conversation');
    UPDATE convo.conversations SET title = btrim(p_title), updated_at = now()
     WHERE id = p_conversation_id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'conversationUpdated',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));
    SELECT * INTO v_conv FROM convo.conversations WHERE id = p_conversation_id;
    RETURN v_conv;
END;
$$;
-- +goose StatementEnd

-- clear_conversation removes every message (with its prompts, blocks, tool
-- calls and comparisons) and keeps the conversation and its event log.
-- Prompts still queued or running are cancelled first, so their workers
-- stop. Events: (the cancellations' events), historyCleared.
-- +goose StatementBegin
CREATE FUNCTION convo.clear_conversation(p_owner_id text, p_conversation_id uuid)
RETURNS convo.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv   convo.conversations;
    v_prompt uuid;
BEGIN
    PERFORM convo._owned_conversation(p_owner_id, p_conversation_id, 'clear_conversation');
    FOR v_prompt IN
        SELECT p.id FROM convo.prompts p
         WHERE p.conversation_id = p_conversation_id AND p.status IN ('queued', 'running')
         ORDER BY p.created_at
    LOOP
        PERFORM convo._finish_prompt(v_prompt, 'cancelled', NULL);
        PERFORM pg_notify('convo_prompts', 'cancelled:' || v_prompt::text);
    END LOOP;
    DELETE FROM convo.messages WHERE conversation_id = p_conversation_id;
    UPDATE convo.conversations SET active_prompt_id = NULL, updated_at = now()
     WHERE id = p_conversation_id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'historyCleared',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));
    SELECT * INTO v_conv FROM convo.conversations WHERE id = p_conversation_id;
    RETURN v_conv;
END;
$$;
-- +goose StatementEnd

-- delete_conversation deletes the conversation and everything in it,
-- cancelling its running prompts' workers, and notifies "convo_events" with
-- '<conversation id>:deleted' so that subscribers are ended.
-- +goose StatementBegin
CREATE FUNCTION convo.delete_conversation(p_owner_id text, p_conversation_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt uuid;
BEGIN
    PERFORM convo._owned_conversation(p_owner_id, p_conversation_id, 'delete_conversation');
    FOR v_prompt IN
        SELECT p.id FROM convo.prompts p
         WHERE p.conversation_id = p_conversation_id AND p.status IN ('queued', 'running')
    LOOP
        PERFORM pg_notify('convo_prompts', 'cancelled:' || v_prompt::text);
    END LOOP;
    DELETE FROM convo.conversations WHERE id = p_conversation_id;
    PERFORM pg_notify('convo_events', p_conversation_id::text || ':deleted');
END;
$$;
-- +goose StatementEnd

-- send_message appends a user message (completed at once, one text block)
-- to the owner's conversation, creating the conversation when
-- p_conversation_id is NULL, and queues one prompt with its pending
-- assistant message for each model configuration in p_model_configs (a JSON
-- array of one object, or two for an A/B comparison, whose messages are
-- slots "a" and "b"). A conversation without a title takes the first line
-- of its first message. Events: messageCreated (user), then per prompt
-- messageCreated (assistant) and promptQueued, then conversationUpdated.
-- Notifies "convo_prompts" with 'queued:<prompt id>' per prompt.
-- +goose StatementBegin
CREATE FUNCTION convo.send_message(p_owner_id text, p_conversation_id uuid, p_text text, p_model_configs jsonb)
RETURNS TABLE (conversation_id uuid, user_message_id uuid, assistant_message_ids uuid[], prompt_ids uuid[],
               comparison_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv       convo.conversations;
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
    IF p_text IS NULL OR p_text !~ '\S' THEN
        RAISE EXCEPTION 'send_message: text must not be empty or only whitespace' USING ERRCODE = 'CV003';
    END IF;
    IF jsonb_typeof(p_model_configs) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_model_configs) NOT BETWEEN 1 AND 2
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_model_configs) c WHERE jsonb_typeof(c.value) <> 'object') THEN
        RAISE EXCEPTION 'send_message: model_configs must be a JSON array of one or two objects' USING ERRCODE = 'CV003';
    END IF;

    IF p_conversation_id IS NULL THEN
        INSERT INTO convo.conversations (owner_id) VALUES (p_owner_id) RETURNING * INTO v_conv;
    ELSE
        v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'send_message');
    END IF;

    INSERT INTO convo.messages (conversation_id, position, role, status)
    VALUES (v_conv.id, v_conv.last_seq + 1, 'user', 'completed')
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
        INSERT INTO convo.messages (conversation_id, position, role, status, comparison_slot)
        VALUES (v_conv.id, v_user.position + v_slot, 'assistant', 'pending',
                CASE WHEN jsonb_array_length(p_model_configs) = 2 THEN chr(ascii('a') + v_slot - 1) END)
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
        PERFORM pg_notify('convo_prompts', 'queued:' || v_prompt.id::text);
    END LOOP;

    UPDATE convo.conversations c
       SET title = CASE WHEN c.title = '' THEN left(btrim(split_part(regexp_replace(p_text, '^\s+', ''), E'\n', 1)), 80)
                        ELSE c.title END,
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

-- set_feedback rates an assistant message of the owner ('up' or 'down',
-- with an optional comment); a second rating replaces the first. Event:
-- messageUpdated.
-- +goose StatementBegin
CREATE FUNCTION convo.set_feedback(p_owner_id text, p_message_id uuid, p_rating text, p_comment text)
RETURNS convo.messages
LANGUAGE plpgsql AS $$
DECLARE
    v_message convo.messages;
BEGIN
    IF p_rating IS NULL OR p_rating NOT IN ('up', 'down') THEN
        RAISE EXCEPTION 'set_feedback: rating must be up or down' USING ERRCODE = 'CV003';
    END IF;
    IF length(coalesce(p_comment, '')) > 2000 THEN
        RAISE EXCEPTION 'set_feedback: comment must be at most 2000 characters' USING ERRCODE = 'CV003';
    END IF;
    SELECT m.* INTO v_message FROM convo.messages m
      JOIN convo.conversations c ON c.id = m.conversation_id
     WHERE m.id = p_message_id AND c.owner_id = p_owner_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'set_feedback: message % does not exist', p_message_id USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._lock_conversation(v_message.conversation_id);
    IF v_message.role <> 'assistant' THEN
        RAISE EXCEPTION 'set_feedback: message % is a % message; only assistant messages take feedback',
            p_message_id, v_message.role USING ERRCODE = 'CV002';
    END IF;
    UPDATE convo.messages
       SET feedback_rating = p_rating, feedback_comment = coalesce(p_comment, ''), feedback_at = now(), updated_at = now()
     WHERE id = p_message_id
    RETURNING * INTO v_message;
    PERFORM convo._append_event(v_message.conversation_id, 'messageUpdated',
        jsonb_build_object('message', convo._message_json(v_message)));
    RETURN v_message;
END;
$$;
-- +goose StatementEnd

-- vote_comparison records the owner's preference ('a', 'b' or 'tie') in a
-- comparison; a second vote replaces the first. Votes are not conversation
-- events: they change no message, prompt or block.
-- +goose StatementBegin
CREATE FUNCTION convo.vote_comparison(p_owner_id text, p_comparison_id uuid, p_preference text)
RETURNS convo.comparisons
LANGUAGE plpgsql AS $$
DECLARE
    v_comparison convo.comparisons;
BEGIN
    IF p_preference IS NULL OR p_preference NOT IN ('a', 'b', 'tie') THEN
        RAISE EXCEPTION 'vote_comparison: preference must be a, b or tie' USING ERRCODE = 'CV003';
    END IF;
    UPDATE convo.comparisons cmp
       SET preference = p_preference, voted_at = now()
      FROM convo.conversations c
     WHERE cmp.id = p_comparison_id AND c.id = cmp.conversation_id AND c.owner_id = p_owner_id
    RETURNING cmp.* INTO v_comparison;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'vote_comparison: comparison % does not exist', p_comparison_id USING ERRCODE = 'CV001';
    END IF;
    RETURN v_comparison;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION convo.vote_comparison(text, uuid, text);
DROP FUNCTION convo.set_feedback(text, uuid, text, text);
DROP FUNCTION convo.send_message(text, uuid, text, jsonb);
DROP FUNCTION convo.delete_conversation(text, uuid);
DROP FUNCTION convo.clear_conversation(text, uuid);
DROP FUNCTION convo.rename_conversation(text, uuid, text);
DROP FUNCTION convo.create_conversation(text, text);
DROP FUNCTION convo._check_title(text, boolean);
DROP FUNCTION convo._owned_conversation(text, uuid, text);
DROP INDEX convo.blocks_search_idx;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._message_json(m convo.messages) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT convo._object(jsonb_build_object(
        'id', m.id, 'conversationId', m.conversation_id, 'role', m.role, 'status', m.status,
        'promptId', (SELECT p.id FROM convo.prompts p WHERE p.message_id = m.id),
        'createdAt', convo._ts(m.created_at), 'updatedAt', convo._ts(m.updated_at)))
$$;
-- +goose StatementEnd
ALTER TABLE convo.messages
    DROP COLUMN comparison_slot, DROP COLUMN comparison_id, DROP COLUMN feedback_at,
    DROP COLUMN feedback_comment, DROP COLUMN feedback_rating;
DROP TABLE convo.comparisons;
