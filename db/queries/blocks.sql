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
-- positions from_position up to (not including) before_position; a running call's output is read
-- back from its progress events.
SELECT t.id, t.block_id, t.prompt_id, t.name, t.input, t.status,
       (CASE WHEN t.status IN ('started', 'running') THEN convo._tool_output(t.id) ELSE t.output END)::text AS output,
       t.error, t.started_at, t.ended_at
  FROM convo.tool_calls t
  JOIN convo.blocks b ON b.id = t.block_id
  JOIN convo.messages m ON m.id = b.message_id
 WHERE t.conversation_id = @conversation_id::uuid
   AND m.on_active_path AND m.position >= @from_position::bigint AND m.position < @before_position::bigint;
