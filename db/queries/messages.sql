

-- name: MessageSendMany :many
-- Sends many messages in one transaction, each in a subtransaction of its
-- own; see convo.send_messages. A zero conversation or parent id is none
-- (NULL). One row per item, in order: its result, or its error's
-- SQLSTATE, message and detail (error_code '' when it was sent).
-- trace_contexts: each item's W3C trace context as JSON, or NULL (the
-- array) for none. policies: each item's send policy ('' for the
-- conversation's); queued: the item's replies await their turn.
SELECT s.ord::integer AS ord,
       coalesce(s.conversation_id, '00000000-0000-0000-0000-000000000000')::uuid AS conversation_id,
       coalesce(s.user_message_id, '00000000-0000-0000-0000-000000000000')::uuid AS user_message_id,
       coalesce(s.assistant_message_ids, '{}')::uuid[] AS assistant_message_ids,
       coalesce(s.prompt_ids, '{}')::uuid[] AS prompt_ids,
       coalesce(s.comparison_id, '00000000-0000-0000-0000-000000000000')::uuid AS comparison_id,
       coalesce(s.error_code, '')::text AS error_code, coalesce(s.error_message, '')::text AS error_message,
       coalesce(s.error_detail, '')::text AS error_detail,
       coalesce(s.queued, false)::boolean AS queued
  FROM convo.send_messages(
         @owner_ids::text[],
         (SELECT array_agg(nullif(x.id, '00000000-0000-0000-0000-000000000000') ORDER BY x.n)
            FROM unnest(@conversation_ids::uuid[]) WITH ORDINALITY x(id, n)),
         @texts::text[], @model_configs::text[],
         (SELECT array_agg(nullif(x.id, '00000000-0000-0000-0000-000000000000') ORDER BY x.n)
            FROM unnest(@parent_message_ids::uuid[]) WITH ORDINALITY x(id, n)),
         @file_ids::text[],
         @trace_contexts::text[],
         @policies::text[]) s
 ORDER BY s.ord;

-- name: MessageListByConversation :many
-- The conversation's messages on its active path at positions
-- from_position up to (not including) before_position, in order, each
-- with its place among its siblings (convo._sibling_place) and, for a
-- failed one, its prompt's error (prompts.message_id is unique: one
-- index lookup a message, which the join to p made already).
SELECT m.*, p.id AS prompt_id, coalesce(CASE WHEN m.status = 'failed' THEN p.error END, '')::text AS prompt_error,
       sp.sibling_count::integer AS sibling_count, sp.sibling_index::integer AS sibling_index
  FROM convo.messages m
  LEFT JOIN convo.prompts p ON p.message_id = m.id
  CROSS JOIN LATERAL convo._sibling_place(m) sp
 WHERE m.conversation_id = @conversation_id::uuid AND m.on_active_path
   AND m.position >= @from_position::bigint AND m.position < @before_position::bigint
 ORDER BY m.position;

-- name: MessageTail :one
-- Where the latest messages of the active path before before_position
-- that fit in max_bytes begin (from_position), and whether messages of it
-- before that remain (older); see convo._message_tail.
SELECT t.from_position::bigint AS from_position, t.older::boolean AS older
  FROM convo._message_tail(@conversation_id::uuid, -1, @before_position::bigint, @max_bytes::bigint) t;

-- name: MessageGet :one
-- The message, when user_id has a role in its conversation (the columns
-- of MessageListByConversation).
SELECT m.*, p.id AS prompt_id, coalesce(CASE WHEN m.status = 'failed' THEN p.error END, '')::text AS prompt_error,
       sp.sibling_count::integer AS sibling_count, sp.sibling_index::integer AS sibling_index
  FROM convo.messages m
  JOIN convo.conversations c ON c.id = m.conversation_id
  LEFT JOIN convo.prompts p ON p.message_id = m.id
  CROSS JOIN LATERAL convo._sibling_place(m) sp
 WHERE m.id = @id::uuid AND (c.owner_id = @user_id::text OR EXISTS (SELECT 1 FROM convo.members mm WHERE mm.conversation_id = c.id AND mm.user_id = @user_id::text));

-- name: MessageSetFeedback :exec
SELECT convo.set_feedback(@owner_id::text, @message_id::uuid, @rating::text, @comment::text);

-- name: MessageDeleteQueued :one
-- Takes back a queued send before its turn; see
-- convo.delete_queued_message. Returns its conversation.
SELECT (convo.delete_queued_message(@owner_id::text, @message_id::uuid)).id::uuid AS conversation_id;
