-- name: BlockListByConversation :many
-- Every block of the messages on the conversation's active path at
-- positions from_position up to (not including) before_position, in message order. A streaming block's
-- content is read back from its delta events, so inside a repeatable-read
-- transaction it is the text as it stood at the conversation's last_seq.
SELECT b.id, b.message_id, b.prompt_id, b.position, b.block_type, b.status,
       (CASE WHEN b.status = 'streaming' THEN convo._block_text(b.id) ELSE b.content END)::text AS content,
       b.metadata, b.created_at, b.ended_at
  FROM convo.blocks b
  JOIN convo.messages m ON m.id = b.message_id
 WHERE b.conversation_id = @conversation_id::uuid
   AND m.on_active_path AND m.position >= @from_position::bigint AND m.position < @before_position::bigint
 ORDER BY m.position, b.position;

-- name: ToolCallListByConversation :many
-- Every tool call of the messages on the conversation's active path at
-- positions from_position up to (not including) before_position; an open
-- call's output is read back from its progress events, those of every
-- open call of a prompt in one pass over the prompt's events from the
-- first such call's block (convo._tool_output per call read the prompt's
-- later events once per call: seconds for a reply with 1,000 open calls).
WITH calls AS (
    SELECT t.id, t.block_id, t.prompt_id, t.name, t.input, t.status, t.output,
           t.error, t.started_at, t.ended_at, b.start_seq
      FROM convo.tool_calls t
      JOIN convo.blocks b ON b.id = t.block_id
      JOIN convo.messages m ON m.id = b.message_id
     WHERE t.conversation_id = @conversation_id::uuid
       AND m.on_active_path AND m.position >= @from_position::bigint AND m.position < @before_position::bigint
), open_prompts AS (
    SELECT c.prompt_id, min(coalesce(c.start_seq, 0)) AS from_seq
      FROM calls c
     WHERE c.status IN ('started', 'running')
     GROUP BY c.prompt_id
), progress AS (
    SELECT e.tool_call_id, string_agg(e.payload->>'output', '' ORDER BY e.seq) AS output
      FROM open_prompts o
      JOIN convo.events e ON e.prompt_id = o.prompt_id AND e.seq > o.from_seq
     WHERE e.kind = 'toolCallProgress'
     GROUP BY e.tool_call_id
)
SELECT c.id, c.block_id, c.prompt_id, c.name, c.input, c.status,
       (CASE WHEN c.status IN ('started', 'running') THEN coalesce(p.output, '') ELSE c.output END)::text AS output,
       c.error, c.started_at, c.ended_at
  FROM calls c
  LEFT JOIN progress p ON p.tool_call_id = c.id;
