-- +goose Up

-- OpenTelemetry (docs/operations.md, "OpenTelemetry"): a prompt keeps the
-- W3C trace context (traceparent, tracestate) of the request that queued
-- it, so that the worker that claims it continues the same trace. NULL:
-- none was given (telemetry off, or a caller that passes none). A new
-- column of NULLs rewrites nothing.
ALTER TABLE convo.prompts ADD COLUMN trace_context jsonb;

-- send_messages takes each message's trace context (an optional last
-- argument, so calls with six arguments keep working): the old signature
-- goes, and db/functions/client_api.sql defines the new one. The worker's
-- read of it, convo.prompt_trace, is new, in db/functions/worker_reads.sql.
DROP FUNCTION IF EXISTS convo.send_messages(text[], uuid[], text[], text[], uuid[], text[]);

-- +goose Down
DROP FUNCTION IF EXISTS convo.prompt_trace(uuid, text);
DROP FUNCTION IF EXISTS convo._trace_context();
DROP FUNCTION IF EXISTS convo._check_trace_context(text, text);
DROP FUNCTION IF EXISTS convo.send_messages(text[], uuid[], text[], text[], uuid[], text[], text[]);
ALTER TABLE convo.prompts DROP COLUMN trace_context;
