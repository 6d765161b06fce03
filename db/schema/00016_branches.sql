-- +goose Up

-- Conversations as trees (docs/branches.md). Every message has a parent
-- (NULL for a first message): a user message's parent is the message it
-- follows, a reply's the user message it answers. Siblings (children of
-- one parent) are the versions of one turn: an edited user message
-- (edit_message), a regenerated reply (regenerate_reply). The two replies
-- of an A/B comparison are children of their user message too, and count
-- as one version: slot "b" is shown beside slot "a", and the next message
-- hangs below slot "a".
--
-- on_active_path marks the messages a reader sees: the path from a first
-- message down to the conversation's active leaf (the newest marked
-- message that is not slot "b"), with the "b" reply of each comparison on
-- it. It is what every read filters on (snapshots, GetConversation,
-- ListMessages, the history export, the AI SDK's messages), so that none
-- of them walks the tree; the functions that change the path
-- (edit_message, regenerate_reply, switch_branch) rewrite the marks of the
-- two branches below the fork, under the conversation's lock.
ALTER TABLE convo.messages
    ADD COLUMN parent_id      uuid    REFERENCES convo.messages (id) ON DELETE CASCADE,
    ADD COLUMN on_active_path boolean NOT NULL DEFAULT true;

CREATE INDEX messages_parent_idx ON convo.messages (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX messages_roots_idx ON convo.messages (conversation_id) WHERE parent_id IS NULL;

-- Existing conversations become single-branch trees with the same
-- readers: messages were appended in position order, so a reply's parent
-- is the latest user message before it, and a user message's parent is
-- the latest message before it that is not slot "b" of a comparison (the
-- reply it followed, or the replacement of a regenerated one). A reply
-- that regenerate_reply replaced (an assistant message, not of a
-- comparison, with a later one answering the same user message) becomes a
-- sibling of its replacement, off the active path: the model's context
-- (prompt_context) already left it out.
UPDATE convo.messages m
   SET parent_id = CASE
           WHEN m.role = 'assistant' THEN
               (SELECT u.id FROM convo.messages u
                 WHERE u.conversation_id = m.conversation_id AND u.role = 'user' AND u.position < m.position
                 ORDER BY u.position DESC LIMIT 1)
           ELSE
               (SELECT t.id FROM convo.messages t
                 WHERE t.conversation_id = m.conversation_id AND t.position < m.position
                   AND t.comparison_slot IS DISTINCT FROM 'b'
                 ORDER BY t.position DESC LIMIT 1)
       END;

UPDATE convo.messages m
   SET on_active_path = false
 WHERE m.role = 'assistant' AND m.comparison_id IS NULL
   AND EXISTS (SELECT 1 FROM convo.messages later
                WHERE later.conversation_id = m.conversation_id AND later.parent_id IS NOT DISTINCT FROM m.parent_id
                  AND later.role = 'assistant' AND later.comparison_id IS NULL AND later.position > m.position);

-- _context_messages is what the model answering the message p_message_id
-- is shown of its conversation: its ancestors, and the other reply of
-- each comparison among them (prompt_context picks one of the two). Its
-- current definition is in db/functions/branches.sql.
-- +goose StatementBegin
CREATE FUNCTION convo._context_messages(p_message_id uuid) RETURNS SETOF uuid
LANGUAGE plpgsql STABLE ROWS 50 AS $$
DECLARE
    v_id         uuid;
    v_next       uuid;
    v_comparison uuid;
BEGIN
    SELECT m.parent_id INTO v_id FROM convo.messages m WHERE m.id = p_message_id;
    WHILE v_id IS NOT NULL LOOP
        RETURN NEXT v_id;
        SELECT m.parent_id, m.comparison_id INTO v_next, v_comparison FROM convo.messages m WHERE m.id = v_id;
        IF v_comparison IS NOT NULL THEN
            RETURN QUERY SELECT pr.message_id FROM convo.comparisons c
                           JOIN convo.prompts pr ON pr.id IN (c.prompt_a, c.prompt_b)
                          WHERE c.id = v_comparison AND pr.message_id <> v_id;
        END IF;
        v_id := v_next;
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- _sibling_place counts a message's versions; the queries of the Go code
-- read it, and the message JSON of db/functions (_message_json) calls it.
-- Its current definition is in db/functions/branches.sql; the other
-- functions of trees are there only (db.Migrate applies them).
-- +goose StatementBegin
CREATE FUNCTION convo._sibling_place(m convo.messages)
RETURNS TABLE (sibling_count integer, sibling_index integer)
LANGUAGE sql STABLE AS $$
    SELECT count(*)::integer,
           (count(*) FILTER (WHERE s.position < m.position
                               AND (m.comparison_id IS NULL OR s.comparison_id IS DISTINCT FROM m.comparison_id)))::integer
      FROM (SELECT x.position, x.comparison_id FROM convo.messages x
             WHERE m.parent_id IS NOT NULL AND x.parent_id = m.parent_id AND x.comparison_slot IS DISTINCT FROM 'b'
            UNION ALL
            SELECT x.position, x.comparison_id FROM convo.messages x
             WHERE m.parent_id IS NULL AND x.parent_id IS NULL AND x.conversation_id = m.conversation_id
               AND x.comparison_slot IS DISTINCT FROM 'b') s
$$;
-- +goose StatementEnd

-- prompt_context as 00015 defined it, over the tree: the earlier messages
-- a prompt's model sees are its message's ancestors (with the other reply
-- of each comparison among them), so a reply on one branch never sees
-- another branch, and a replaced reply (a sibling, not an ancestor) is
-- left out without a rule of its own. The rest is unchanged: finished
-- blocks of the kinds that count, assistant messages that completed or
-- were cancelled, and of a comparison only the preferred reply.
CREATE OR REPLACE VIEW convo.prompt_context AS
SELECT p.id AS prompt_id, m.id AS message_id, m.role, b.block_type, b.content, b.metadata,
       t.id AS tool_call_id, t.name AS tool_name, t.input AS tool_input,
       t.status AS tool_status, t.output AS tool_output, t.error AS tool_error,
       m.position AS message_position, b.position AS block_position
  FROM convo.prompts p
  JOIN convo.messages target ON target.id = p.message_id
  CROSS JOIN LATERAL convo._context_messages(target.id) AS ctx(id)
  JOIN convo.messages m ON m.id = ctx.id AND m.position < target.position
  JOIN convo.blocks b ON b.message_id = m.id
  LEFT JOIN convo.tool_calls t ON t.block_id = b.id
  LEFT JOIN convo.comparisons c ON c.id = m.comparison_id
 WHERE b.status = 'completed'
   AND b.block_type IN ('text', 'structured', 'tool_use', 'tool_result')
   AND (m.role <> 'assistant' OR m.status IN ('completed', 'cancelled'))
   AND (m.comparison_id IS NULL
        OR (m.comparison_id IS DISTINCT FROM target.comparison_id
            AND m.comparison_slot = coalesce(nullif(c.preference, 'tie'), 'a')));

-- +goose Down
CREATE OR REPLACE VIEW convo.prompt_context AS
SELECT p.id AS prompt_id, m.id AS message_id, m.role, b.block_type, b.content, b.metadata,
       t.id AS tool_call_id, t.name AS tool_name, t.input AS tool_input,
       t.status AS tool_status, t.output AS tool_output, t.error AS tool_error,
       m.position AS message_position, b.position AS block_position
  FROM convo.prompts p
  JOIN convo.messages target ON target.id = p.message_id
  JOIN convo.messages m ON m.conversation_id = target.conversation_id AND m.position < target.position
  JOIN convo.blocks b ON b.message_id = m.id
  LEFT JOIN convo.tool_calls t ON t.block_id = b.id
  LEFT JOIN convo.comparisons c ON c.id = m.comparison_id
 WHERE b.status = 'completed'
   AND b.block_type IN ('text', 'structured', 'tool_use', 'tool_result')
   AND (m.role <> 'assistant' OR m.status IN ('completed', 'cancelled'))
   AND (m.comparison_id IS NULL
        OR (m.comparison_id IS DISTINCT FROM target.comparison_id
            AND m.comparison_slot = coalesce(nullif(c.preference, 'tie'), 'a')))
   AND NOT (m.role = 'assistant' AND m.comparison_id IS NULL AND EXISTS (
        SELECT 1 FROM convo.messages later
         WHERE later.conversation_id = m.conversation_id
           AND later.position > m.position AND later.position <= target.position
           AND later.role = 'assistant' AND later.comparison_id IS NULL
           AND NOT EXISTS (SELECT 1 FROM convo.messages u
                            WHERE u.conversation_id = m.conversation_id AND u.role = 'user'
                              AND u.position > m.position AND u.position < later.position)));
-- The functions as they were before this migration (db/functions holds
-- the current ones), then the new ones dropped: the functions of today
-- read the columns dropped here.
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.send_message(p_owner_id text, p_conversation_id uuid, p_text text, p_model_configs jsonb)
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
    IF p_text IS NULL OR NOT convo._has_visible(p_text) THEN
        RAISE EXCEPTION 'send_message: text must not be empty or only whitespace, control, zero-width or bidi control characters'
            USING ERRCODE = 'CV003';
    END IF;
    IF jsonb_typeof(p_model_configs) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_model_configs) NOT BETWEEN 1 AND 2
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_model_configs) c WHERE jsonb_typeof(c.value) <> 'object') THEN
        RAISE EXCEPTION 'send_message: model_configs must be a JSON array of one or two objects' USING ERRCODE = 'CV003';
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.regenerate_reply(p_owner_id text, p_conversation_id uuid, p_message_id uuid,
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
    -- The quota, before the conversation is locked (see _check_prompt_quota).
    PERFORM convo._check_prompt_quota(p_owner_id, 1, 'regenerate_reply');
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
    PERFORM convo._notify_prompt('queued', v_prompt.id);

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
DROP FUNCTION convo._context_messages(uuid);
DROP FUNCTION IF EXISTS convo.edit_message(text, uuid, uuid, text, jsonb);
DROP FUNCTION IF EXISTS convo.switch_branch(text, uuid, uuid);
DROP FUNCTION IF EXISTS convo._queue_reply(uuid, uuid, bigint, jsonb);
DROP FUNCTION IF EXISTS convo._queued_reply(convo.prompts);
DROP FUNCTION IF EXISTS convo._check_no_reply_in_flight(uuid, text);
DROP FUNCTION IF EXISTS convo._change_path(uuid, uuid);
DROP FUNCTION IF EXISTS convo._active_leaf(uuid);
DROP FUNCTION IF EXISTS convo._path(uuid);
DROP FUNCTION IF EXISTS convo._block_json(convo.blocks);
DROP FUNCTION convo._sibling_place(convo.messages);
ALTER TABLE convo.messages DROP COLUMN on_active_path, DROP COLUMN parent_id;
