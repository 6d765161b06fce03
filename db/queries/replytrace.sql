-- name: ReplyTraceContexts :many
-- The W3C trace context (convo.prompts.trace_context) the prompts of the
-- messages message_ids of conversations user_id has a role in keep, for those that keep one: what the
-- server continues when it records a rating or a vote on a reply's trace.
SELECT p.message_id, p.trace_context::jsonb AS trace_context
  FROM convo.prompts p
 WHERE convo.member_role(@user_id::text, p.conversation_id) IS NOT NULL
   AND p.message_id = ANY(@message_ids::uuid[])
   AND p.trace_context IS NOT NULL;
