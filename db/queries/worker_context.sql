-- What the Go worker runtime reads, besides the SQL worker API: the
-- conversation a prompt answers, as context for the model.

-- name: WorkerContextList :many
-- The finished blocks of the messages before the prompt's message, in
-- order, that a model sees as context: text, structured, tool_use (with
-- its tool call) and tool_result blocks. Assistant messages count when
-- they completed or were cancelled (the partial reply stays); failed and
-- unfinished ones do not. Of an earlier A/B comparison only the preferred
-- reply counts (slot "a" until the owner votes, and on a tie); the other
-- reply of the prompt's own comparison is left out. A reply that a later
-- one replaced (convo.regenerate_reply: another assistant message, not of
-- a comparison, before the next user message) is left out too.
WITH target AS (
    SELECT m.conversation_id, m.position, m.comparison_id
      FROM convo.prompts p
      JOIN convo.messages m ON m.id = p.message_id
     WHERE p.id = @prompt_id::uuid
)
SELECT m.id AS message_id, m.role, b.block_type, b.content, b.metadata,
       t.id AS tool_call_id, t.name AS tool_name, t.input AS tool_input,
       t.status AS tool_status, t.output AS tool_output, t.error AS tool_error
  FROM target
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
                              AND u.position > m.position AND u.position < later.position)))
 ORDER BY m.position, b.position;

-- name: WorkerReplyList :many
-- The finished blocks of the prompt's own reply so far, in order, as
-- WorkerContextList gives the earlier messages': what a worker that
-- resumes a paused prompt (see convo.wait_prompt) gives the model, so the
-- reply goes on where it stopped.
SELECT m.id AS message_id, m.role, b.block_type, b.content, b.metadata,
       t.id AS tool_call_id, t.name AS tool_name, t.input AS tool_input,
       t.status AS tool_status, t.output AS tool_output, t.error AS tool_error
  FROM convo.prompts p
  JOIN convo.messages m ON m.id = p.message_id
  JOIN convo.blocks b ON b.message_id = m.id
  LEFT JOIN convo.tool_calls t ON t.block_id = b.id
 WHERE p.id = @prompt_id::uuid
   AND b.status = 'completed'
   AND b.block_type IN ('text', 'structured', 'tool_use', 'tool_result')
 ORDER BY b.position;
