-- name: SnapshotConversations :many
-- For each request nth (1-based) of (ids, user_ids, max_bytes) whose
-- conversation exists and its user has a role in (its owner or a
-- member): the conversation, and
-- where the latest messages of its active path that fit in its max_bytes
-- begin (from_position) and whether older ones remain (older); see
-- convo._message_tail. A request of an unknown or foreign conversation
-- has no row.
WITH r AS (
    SELECT unnest(@ids::uuid[]) AS id, unnest(@user_ids::text[]) AS user_id,
           unnest(@max_bytes::bigint[]) AS max_bytes, generate_subscripts(@ids::uuid[], 1) AS nth
)
SELECT r.nth::integer AS nth, sqlc.embed(c), t.from_position::bigint AS from_position, t.older::boolean AS older,
       (CASE WHEN c.owner_id = r.user_id THEN 'owner'
             ELSE (SELECT mm.role FROM convo.members mm WHERE mm.conversation_id = c.id AND mm.user_id = r.user_id) END)::text AS role
  FROM r
  JOIN convo.conversations c ON c.id = r.id
                            AND (c.owner_id = r.user_id
                                 OR EXISTS (SELECT 1 FROM convo.members mm
                                             WHERE mm.conversation_id = c.id AND mm.user_id = r.user_id))
 CROSS JOIN LATERAL convo._message_tail(c.id, -1, 9223372036854775807, r.max_bytes) t
 ORDER BY r.nth;

-- name: SnapshotMessages :many
-- The messages of each conversation's active path from its from_position
-- on, as MessageListByConversation reads them (the same columns), in
-- position order per conversation. Each conversation is named once.
WITH r AS (
    SELECT unnest(@conversation_ids::uuid[]) AS conversation_id, unnest(@from_positions::bigint[]) AS from_position
)
SELECT m.*, p.id AS prompt_id, coalesce(CASE WHEN m.status = 'failed' THEN p.error END, '')::text AS prompt_error,
       sp.sibling_count::integer AS sibling_count, sp.sibling_index::integer AS sibling_index
  FROM r
  JOIN convo.messages m ON m.conversation_id = r.conversation_id AND m.on_active_path
                       AND m.position >= r.from_position
  LEFT JOIN convo.prompts p ON p.message_id = m.id
  CROSS JOIN LATERAL convo._sibling_place(m) sp
 ORDER BY m.conversation_id, m.position;

-- name: SnapshotBlocks :many
-- The blocks of those messages, as BlockListByConversation reads them (the
-- same columns): a streaming block's content is its text as it stood at
-- the transaction's snapshot, read back from its delta events.
WITH r AS (
    SELECT unnest(@conversation_ids::uuid[]) AS conversation_id, unnest(@from_positions::bigint[]) AS from_position
)
SELECT b.id, b.message_id, b.prompt_id, b.position, b.block_type, b.status,
       (CASE WHEN b.status = 'streaming' THEN convo._block_text(b.id) ELSE b.content END)::text AS content,
       b.metadata, b.created_at, b.ended_at
  FROM r
  JOIN convo.blocks b ON b.conversation_id = r.conversation_id
  JOIN convo.messages m ON m.id = b.message_id
 WHERE m.on_active_path AND m.position >= r.from_position
 ORDER BY m.conversation_id, m.position, b.position;

-- name: SnapshotToolCalls :many
-- The tool calls of those messages, as ToolCallListByConversation reads
-- them (the same columns; an open call's output read back from its
-- progress events, in one pass over each prompt's events).
WITH r AS (
    SELECT unnest(@conversation_ids::uuid[]) AS conversation_id, unnest(@from_positions::bigint[]) AS from_position
), calls AS (
    SELECT t.id, t.block_id, t.prompt_id, t.name, t.input, t.status, t.output,
           t.error, t.started_at, t.ended_at, b.start_seq
      FROM r
      JOIN convo.tool_calls t ON t.conversation_id = r.conversation_id
      JOIN convo.blocks b ON b.id = t.block_id
      JOIN convo.messages m ON m.id = b.message_id
     WHERE m.on_active_path AND m.position >= r.from_position
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

-- name: SnapshotInputRequests :many
-- For each request nth (1-based) of (conversation_ids, max_bytes): the
-- open input requests of the conversation, as InputRequestListOpen reads
-- them with that max_bytes (the budget counted per request), in the order
-- the calls started.
WITH r AS (
    SELECT unnest(@conversation_ids::uuid[]) AS conversation_id, unnest(@max_bytes::bigint[]) AS max_bytes,
           generate_subscripts(@conversation_ids::uuid[], 1) AS nth
)
SELECT r.nth::integer AS nth,
       q.tool_call_id, q.conversation_id, q.prompt_id, q.kind, q.request, q.status,
       (CASE WHEN r.max_bytes < 0 OR q.kind = 'approval'
              OR sum(256 + octet_length(q.request::text) + coalesce(q.answer_bytes, 0))
                   OVER (PARTITION BY r.nth ORDER BY t.started_at, t.id) <= r.max_bytes
            THEN q.answer END)::jsonb AS answer,
       q.answered_at, q.expires_at, q.claimed_by, q.claim_expires_at, q.created_at
  FROM r
  JOIN convo.prompts p ON p.conversation_id = r.conversation_id AND p.status IN ('queued', 'running')
  JOIN convo.input_requests q ON q.prompt_id = p.id
  JOIN convo.tool_calls t ON t.id = q.tool_call_id
 WHERE t.status IN ('started', 'running')
 ORDER BY r.nth, t.started_at, t.id;
