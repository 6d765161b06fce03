-- The client side of pauses (db/functions/client_inputs.sql): answering an
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
-- conversation shows besides its messages. Each counts 256 bytes, its
-- request and its answer; a client tool's or a question's answer (up to
-- 100,000 characters) is left out (NULL) once the requests up to and
-- including its own add up to more than max_bytes (a negative max_bytes:
-- never). A pending request has no answer, and an approval's is small
-- (a reason of at most 2,000 characters) and says how it was decided:
-- both are always whole.
SELECT r.tool_call_id, r.conversation_id, r.prompt_id, r.kind, r.request, r.status,
       (CASE WHEN @max_bytes::bigint < 0 OR r.kind = 'approval'
              OR sum(256 + octet_length(r.request::text) + coalesce(r.answer_bytes, 0))
                   OVER (ORDER BY t.started_at, t.id) <= @max_bytes::bigint
            THEN r.answer END)::jsonb AS answer,
       r.answered_at, r.expires_at, r.claimed_by, r.claim_expires_at, r.created_at
  FROM convo.input_requests r
  JOIN convo.tool_calls t ON t.id = r.tool_call_id
 WHERE r.prompt_id IN (SELECT p.id FROM convo.prompts p
                        WHERE p.conversation_id = @conversation_id::uuid AND p.status IN ('queued', 'running'))
   AND t.status IN ('started', 'running')
 ORDER BY t.started_at, t.id;

-- name: InputAnswerable :one
-- What AnswerInput checks before it validates an answer, in one read:
-- the input request on tool_call_id of a conversation of which user_id
-- is the owner or a participant (no row: none, or the user has no role
-- in its conversation; CV005 when the user only views it), whether it can still be answered (pending, not past its
-- expiry: convo.answer_input refuses any other), and its output schema
-- (a client_tool request's; NULL for none).
SELECT (r.status = 'pending' AND (r.expires_at IS NULL OR r.expires_at > now()))::boolean AS answerable,
       (CASE WHEN r.kind = 'client_tool' THEN r.request -> 'outputSchema' END)::jsonb AS output_schema
  FROM convo.input_requests r
 WHERE r.tool_call_id = @tool_call_id::uuid AND convo._may(@user_id::text, r.conversation_id, 'answer_input', 'participant');
