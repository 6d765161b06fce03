-- +goose Up

-- The worker role (docs/deploy.md, "The worker role"): a group role that
-- may only call the SQL worker API. db/functions/privileges.sql makes the
-- worker functions SECURITY DEFINER and grants them to it on every start;
-- this migration creates the role, and the reads a worker needs as
-- functions that answer only about a prompt the calling worker holds (the
-- role reads no table or view). Their current definitions are in
-- db/functions/worker_reads.sql.
--
-- A role belongs to the cluster, not to the database: it may exist
-- already (another database of the cluster migrated first, perhaps at this
-- very moment), and the user that migrates may not be allowed to create
-- one (a managed PostgreSQL), in which case an administrator creates it
-- (docs/deploy.md) and the next start grants it.
-- +goose StatementBegin
DO $$
BEGIN
    IF to_regrole('convo_worker') IS NOT NULL THEN
        RETURN;
    END IF;
    IF NOT (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user) THEN
        RAISE NOTICE 'role convo_worker not created: % may not create roles; see docs/deploy.md ("The worker role") for the SQL an administrator runs',
            current_user;
        RETURN;
    END IF;
    BEGIN
        CREATE ROLE convo_worker NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
        -- Another database of the cluster created it meanwhile.
        NULL;
    END;
END;
$$;
-- +goose StatementEnd

-- prompt_inputs takes the worker's name, and answers only about a prompt
-- it holds. (The old one was applied from db/functions, after the
-- migrations: a new database has none yet.)
DROP FUNCTION IF EXISTS convo.prompt_inputs(uuid);

-- _held_prompt returns the prompt worker holds (claimed or running, not
-- handed back), raising CV001 otherwise: an unknown prompt and one another
-- worker holds (or nobody) answer alike, so that a caller cannot probe
-- which prompts exist.
-- +goose StatementBegin
CREATE FUNCTION convo._held_prompt(p_prompt_id uuid, p_worker text, p_action text) RETURNS convo.prompts
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_prompt convo.prompts;
BEGIN
    SELECT * INTO v_prompt FROM convo.prompts p
     WHERE p.id = p_prompt_id AND p.worker = p_worker AND p.status IN ('queued', 'running');
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: prompt % is not held by worker %', p_action, p_prompt_id, p_worker
            USING ERRCODE = 'CV001', HINT = 'claim the prompt first (convo.claim_prompts)';
    END IF;
    RETURN v_prompt;
END;
$$;
-- +goose StatementEnd

-- worker_context returns the rows of the view convo.prompt_context of a
-- prompt worker holds: the finished blocks of the messages before the
-- prompt's own that its model sees. Order them by message_position,
-- block_position. CV001 unless worker holds the prompt.
-- +goose StatementBegin
CREATE FUNCTION convo.worker_context(prompt_id uuid, worker text)
RETURNS SETOF convo.prompt_context
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM convo._held_prompt(worker_context.prompt_id, worker_context.worker, 'worker_context');
    RETURN QUERY
    SELECT c.*
      FROM convo.prompt_context c
     WHERE c.prompt_id = worker_context.prompt_id
     ORDER BY c.message_position, c.block_position;
END;
$$;
-- +goose StatementEnd

-- worker_reply returns the rows of the view convo.prompt_reply of a prompt
-- worker holds: its own reply so far, which a worker resuming a paused
-- prompt gives the model. Order them by block_position. CV001 unless
-- worker holds the prompt.
-- +goose StatementBegin
CREATE FUNCTION convo.worker_reply(prompt_id uuid, worker text)
RETURNS SETOF convo.prompt_reply
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM convo._held_prompt(worker_reply.prompt_id, worker_reply.worker, 'worker_reply');
    RETURN QUERY
    SELECT r.*
      FROM convo.prompt_reply r
     WHERE r.prompt_id = worker_reply.prompt_id
     ORDER BY r.block_position;
END;
$$;
-- +goose StatementEnd

-- prompt_inputs returns the input requests of the tool calls of a prompt
-- worker holds, in the order the calls started, each with its call and
-- its answer: what a worker that resumes the prompt reads. status is
-- pending, answered, expired (answer is then the denial expire_leases
-- wrote) or cancelled; answer is NULL unless answered or expired. A
-- request whose tool call is still open (tool_call_status started) is one
-- the worker has not acted on yet. CV001 unless worker holds the prompt.
-- VOLATILE, so that it sees the claim of the statement that calls it:
-- the runtimes ask EXISTS (SELECT 1 FROM convo.prompt_inputs(c.prompt_id,
-- worker)) of each row of claim_prompts (is it a resumed prompt?), which
-- a STABLE function, reading the statement's snapshot, would find held
-- by nobody.
-- +goose StatementBegin
CREATE FUNCTION convo.prompt_inputs(prompt_id uuid, worker text)
RETURNS TABLE (tool_call_id uuid, block_id uuid, name text, input jsonb, tool_call_status text, kind text,
               request jsonb, status text, answer jsonb, answered_at timestamptz, expires_at timestamptz)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM convo._held_prompt(prompt_inputs.prompt_id, prompt_inputs.worker, 'prompt_inputs');
    RETURN QUERY
    SELECT r.tool_call_id, t.block_id, t.name, t.input, t.status, r.kind,
           r.request, r.status, r.answer, r.answered_at, r.expires_at
      FROM convo.input_requests r
      JOIN convo.tool_calls t ON t.id = r.tool_call_id
     WHERE r.prompt_id = prompt_inputs.prompt_id
     ORDER BY t.started_at, t.id;
END;
$$;
-- +goose StatementEnd

-- prompt_status returns the status (queued, running, completed, failed,
-- cancelled) of a prompt worker holds or held last: what a worker reads
-- when a write finds the prompt no longer its own, to tell a cancel from
-- a lost lease. NULL when the prompt is unknown, or another worker (or
-- none: it was handed back) holds it now.
-- +goose StatementBegin
CREATE FUNCTION convo.prompt_status(prompt_id uuid, worker text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT p.status FROM convo.prompts p
     WHERE p.id = prompt_status.prompt_id AND p.worker = prompt_status.worker
$$;
-- +goose StatementEnd

-- worker_batch_mark returns the number of the last batch write_batch
-- applied for worker's lane (one row), or no row when it has none: a
-- worker that starts (or restarts with its name) numbers on from there.
-- +goose StatementBegin
CREATE FUNCTION convo.worker_batch_mark(worker text, lane integer)
RETURNS TABLE (batch bigint)
LANGUAGE sql STABLE AS $$
    SELECT w.batch FROM convo.worker_batches w
     WHERE w.worker = worker_batch_mark.worker AND w.lane = worker_batch_mark.lane
$$;
-- +goose StatementEnd

-- +goose Down
-- The role stays: other databases of the cluster may use it.
DROP FUNCTION convo.worker_batch_mark(text, integer);
DROP FUNCTION convo.prompt_status(uuid, text);
DROP FUNCTION convo.prompt_inputs(uuid, text);
DROP FUNCTION convo.worker_reply(uuid, text);
DROP FUNCTION convo.worker_context(uuid, text);
DROP FUNCTION convo._held_prompt(uuid, text, text);
-- +goose StatementBegin
CREATE FUNCTION convo.prompt_inputs(prompt_id uuid)
RETURNS TABLE (tool_call_id uuid, block_id uuid, name text, input jsonb, tool_call_status text, kind text,
               request jsonb, status text, answer jsonb, answered_at timestamptz, expires_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT r.tool_call_id, t.block_id, t.name, t.input, t.status, r.kind,
           r.request, r.status, r.answer, r.answered_at, r.expires_at
      FROM convo.input_requests r
      JOIN convo.tool_calls t ON t.id = r.tool_call_id
     WHERE r.prompt_id = prompt_inputs.prompt_id
     ORDER BY t.started_at, t.id
$$;
-- +goose StatementEnd
