-- name: MessageSend :one
-- Appends a user message and queues its prompt(s); see convo.send_message
-- (parent_message_id: the active leaf the client expects, or NULL).
SELECT s.conversation_id::uuid AS conversation_id, s.user_message_id::uuid AS user_message_id,
       s.assistant_message_ids::uuid[] AS assistant_message_ids, s.prompt_ids::uuid[] AS prompt_ids,
       s.comparison_id::uuid AS comparison_id
  FROM convo.send_message(@owner_id::text, sqlc.narg(conversation_id)::uuid, @text::text, @model_configs::jsonb,
                          sqlc.narg(parent_message_id)::uuid) s;

-- name: MessageListByConversation :many
-- The conversation's messages on its active path at positions
-- from_position up to (not including) before_position, in order, each
-- with its place among its siblings (convo._sibling_place).
SELECT m.*, p.id AS prompt_id, sp.sibling_count::integer AS sibling_count, sp.sibling_index::integer AS sibling_index
  FROM convo.messages m
  LEFT JOIN convo.prompts p ON p.message_id = m.id
  CROSS JOIN LATERAL convo._sibling_place(m) sp
 WHERE m.conversation_id = @conversation_id::uuid AND m.on_active_path
   AND m.position >= @from_position::bigint AND m.position < @before_position::bigint
 ORDER BY m.position;

-- name: MessageTail :one
-- Where the latest messages of the active path before before_position
-- that fit in max_bytes begin (from_position), and whether messages of it
-- before that remain (older).
-- A message's size is its blocks' text, metadata and tool calls plus 256
-- bytes, so that many small messages count too; only sizes are read, not
-- the text itself (octet_length of a stored value reads its header). The
-- newest message is always in, however large, and so is every message
-- still being written (pending or processing) with every message after
-- it. At most max_messages (the most that can fit: max_bytes over 256,
-- plus one) are sized.
WITH newest AS (
  SELECT m.id, m.position
    FROM convo.messages m
   WHERE m.conversation_id = @conversation_id::uuid AND m.on_active_path AND m.position < @before_position::bigint
   ORDER BY m.position DESC
   LIMIT @max_messages::bigint
), sized AS (
  SELECT n.position,
         sum(256 + coalesce((SELECT sum(octet_length(b.content) + pg_column_size(b.metadata))
                               FROM convo.blocks b WHERE b.message_id = n.id), 0)
                 + coalesce((SELECT sum(pg_column_size(t.input) + octet_length(t.output) + coalesce(octet_length(t.error), 0))
                               FROM convo.blocks b JOIN convo.tool_calls t ON t.block_id = b.id
                              WHERE b.message_id = n.id), 0))
           OVER (ORDER BY n.position DESC) AS running,
         row_number() OVER (ORDER BY n.position DESC) AS nth
    FROM newest n
), bounds AS (
  SELECT least(
           (SELECT min(position) FROM sized WHERE running <= @max_bytes::bigint OR nth = 1),
           (SELECT min(m.position) FROM convo.messages m
             WHERE m.conversation_id = @conversation_id::uuid AND m.on_active_path
               AND m.position < @before_position::bigint AND m.status IN ('pending', 'processing'))
         ) AS from_position
)
SELECT coalesce(b.from_position, @before_position::bigint)::bigint AS from_position,
       EXISTS (SELECT 1 FROM convo.messages m
                WHERE m.conversation_id = @conversation_id::uuid AND m.on_active_path
                  AND m.position < coalesce(b.from_position, @before_position::bigint)) AS older
  FROM bounds b;

-- name: MessageGet :one
-- The message, when its conversation belongs to owner_id.
SELECT m.*, p.id AS prompt_id, sp.sibling_count::integer AS sibling_count, sp.sibling_index::integer AS sibling_index
  FROM convo.messages m
  JOIN convo.conversations c ON c.id = m.conversation_id
  LEFT JOIN convo.prompts p ON p.message_id = m.id
  CROSS JOIN LATERAL convo._sibling_place(m) sp
 WHERE m.id = @id::uuid AND c.owner_id = @owner_id::text;

-- name: MessageSetFeedback :exec
SELECT convo.set_feedback(@owner_id::text, @message_id::uuid, @rating::text, @comment::text);
