-- What a worker reads, besides what the write functions return: the
-- model's context, the reply so far, the answers of its input requests, a
-- prompt's status and its batch mark (docs/worker-api.md). Each takes the
-- worker's name and answers only about a prompt that worker holds, so that
-- a connection of the worker role (privileges.sql), which may read no
-- table, cannot read a conversation no prompt of its own answers.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), so a change to a function is
-- an edit here. See db/README.md.

-- _held_prompt returns the prompt worker holds (claimed or running, not
-- handed back), raising CV001 otherwise: an unknown prompt and one another
-- worker holds (or nobody) answer alike, so that a caller cannot probe
-- which prompts exist.
CREATE OR REPLACE FUNCTION convo._held_prompt(p_prompt_id uuid, p_worker text, p_action text) RETURNS convo.prompts
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

-- worker_context returns the rows of the view convo.prompt_context of a
-- prompt worker holds: the finished blocks of the messages before the
-- prompt's own that its model sees. Order them by message_position,
-- block_position. CV001 unless worker holds the prompt.
CREATE OR REPLACE FUNCTION convo.worker_context(prompt_id uuid, worker text)
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

-- worker_reply returns the rows of the view convo.prompt_reply of a prompt
-- worker holds: its own reply so far, which a worker resuming a paused
-- prompt gives the model. Order them by block_position. CV001 unless
-- worker holds the prompt.
CREATE OR REPLACE FUNCTION convo.worker_reply(prompt_id uuid, worker text)
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
CREATE OR REPLACE FUNCTION convo.prompt_inputs(prompt_id uuid, worker text)
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

-- prompt_status returns the status (queued, running, completed, failed,
-- cancelled) of a prompt worker holds or held last: what a worker reads
-- when a write finds the prompt no longer its own, to tell a cancel from
-- a lost lease. NULL when the prompt is unknown, or another worker (or
-- none: it was handed back) holds it now.
CREATE OR REPLACE FUNCTION convo.prompt_status(prompt_id uuid, worker text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT p.status FROM convo.prompts p
     WHERE p.id = prompt_status.prompt_id AND p.worker = prompt_status.worker
$$;

-- worker_batch_mark returns the number of the last batch write_batch
-- applied for worker's lane (one row), or no row when it has none: a
-- worker that starts (or restarts with its name) numbers on from there.
CREATE OR REPLACE FUNCTION convo.worker_batch_mark(worker text, lane integer)
RETURNS TABLE (batch bigint)
LANGUAGE sql STABLE AS $$
    SELECT w.batch FROM convo.worker_batches w
     WHERE w.worker = worker_batch_mark.worker AND w.lane = worker_batch_mark.lane
$$;
