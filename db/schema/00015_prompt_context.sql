-- +goose Up

-- The context a model answering a prompt sees, as views, so that every
-- worker runtime (the Go one, and the TypeScript and Python SDKs under
-- clients/) reads one definition of it. Read one prompt's rows with
-- WHERE prompt_id = $1 ORDER BY message_position, block_position
-- (db/queries/worker_context.sql is the Go runtime's query).

-- prompt_context: what a model answering the prompt sees of the
-- conversation before it, the finished blocks of the earlier messages,
-- each with its tool call when it has one. Only text, structured, tool_use
-- and tool_result blocks count. Assistant messages count when they
-- completed or were cancelled (the partial reply stays); failed and
-- unfinished ones do not. Of an earlier A/B comparison only the preferred
-- reply counts (slot "a" until the owner votes, and on a tie); the other
-- reply of the prompt's own comparison is left out. A reply that a later
-- one replaced (regenerate_reply: another assistant message, not of a
-- comparison, before the next user message) is left out too.
CREATE VIEW convo.prompt_context AS
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

-- prompt_reply: the prompt's own reply so far, as prompt_context gives the
-- earlier messages: what a worker that resumes a paused prompt (see
-- wait_prompt) gives the model, so the reply goes on where it stopped.
CREATE VIEW convo.prompt_reply AS
SELECT p.id AS prompt_id, m.id AS message_id, m.role, b.block_type, b.content, b.metadata,
       t.id AS tool_call_id, t.name AS tool_name, t.input AS tool_input,
       t.status AS tool_status, t.output AS tool_output, t.error AS tool_error,
       m.position AS message_position, b.position AS block_position
  FROM convo.prompts p
  JOIN convo.messages m ON m.id = p.message_id
  JOIN convo.blocks b ON b.message_id = m.id
  LEFT JOIN convo.tool_calls t ON t.block_id = b.id
 WHERE b.status = 'completed'
   AND b.block_type IN ('text', 'structured', 'tool_use', 'tool_result');

-- +goose Down
DROP VIEW convo.prompt_reply;
DROP VIEW convo.prompt_context;
