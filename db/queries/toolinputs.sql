-- name: ToolCallInputs :many
-- The input requests of the given tool calls (none for a call that asked
-- for no input). It does not check ownership: callers pass the calls of a
-- conversation whose ownership they have checked.
SELECT q.tool_call_id, q.kind, q.status, q.answer
  FROM convo.input_requests q
 WHERE q.tool_call_id = ANY(@tool_call_ids::uuid[]);
