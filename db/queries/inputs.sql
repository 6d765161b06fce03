-- The client side of pauses (db/functions/client_api.sql): answering an
-- input request, and claiming a client tool's run.

-- name: InputAnswer :one
-- Answers the owner's pending input request (first answer wins); see
-- convo.answer_input. It returns the request as answered, in the proto3
-- JSON of convo.v1.InputRequest.
SELECT convo._input_request_json(r)::jsonb AS input_request
  FROM convo.answer_input(@owner_id::text, @tool_call_id::uuid, @answer::jsonb) r;

-- name: InputClaim :one
-- Claims the owner's pending client_tool request for a claimant (a tab);
-- see convo.claim_input. It returns the request as claimed, in the proto3
-- JSON of convo.v1.InputRequest.
SELECT convo._input_request_json(r)::jsonb AS input_request
  FROM convo.claim_input(@owner_id::text, @tool_call_id::uuid, @claimant::text, @lease_seconds::int) r;

-- name: InputRequestListOpen :many
-- The input requests of a conversation's unfinished prompts whose tool
-- calls are still open (pending, or answered and not yet acted on by a
-- worker), in the order the calls started: what a snapshot of the
-- conversation shows besides its messages.
SELECT r.*
  FROM convo.input_requests r
  JOIN convo.tool_calls t ON t.id = r.tool_call_id
 WHERE r.prompt_id IN (SELECT p.id FROM convo.prompts p
                        WHERE p.conversation_id = @conversation_id::uuid AND p.status IN ('queued', 'running'))
   AND t.status IN ('started', 'running')
 ORDER BY t.started_at, t.id;

-- name: InputAnswerable :one
-- What AnswerInput checks before it validates an answer, in one read: an
-- owner's input request on tool_call_id (no row: none, or not the
-- owner's), whether it can still be answered (pending, not past its
-- expiry: convo.answer_input refuses any other), and its output schema
-- (a client_tool request's; NULL for none).
SELECT (r.status = 'pending' AND (r.expires_at IS NULL OR r.expires_at > now()))::boolean AS answerable,
       (CASE WHEN r.kind = 'client_tool' THEN r.request -> 'outputSchema' END)::jsonb AS output_schema
  FROM convo.input_requests r
  JOIN convo.conversations c ON c.id = r.conversation_id
 WHERE r.tool_call_id = @tool_call_id::uuid AND c.owner_id = @owner_id::text;
