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
DROP FUNCTION IF EXISTS convo._sibling_place(convo.messages);
-- The functions of db/functions that write messages read the columns
-- dropped here: going down, apply the functions of the version before (a
-- checkout of it runs Migrate) before writing again.
ALTER TABLE convo.messages DROP COLUMN on_active_path, DROP COLUMN parent_id;
