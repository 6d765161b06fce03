-- +goose Up

-- Pauses: a tool call can stop its prompt until a person answers, an
-- approval, a client tool (run by the browser) or a question. While it
-- waits the prompt holds no worker, no lease and no connection; the answer
-- queues it again and any worker resumes it. The functions are in
-- db/functions (worker_api.sql: request_input, wait_prompt, prompt_inputs;
-- client_api.sql: answer_input, claim_input; batch.sql: the ops of the
-- same names); docs/worker-api.md, "Pauses", is the reference.
--
-- * A waiting prompt keeps the status queued (the statuses are part of the
--   public contract) with prompts.waiting true: it is unfinished (the
--   conversation's active prompt, counted by the quota of prompts in
--   flight) but not claimable, and it does not make its owner wait in
--   convo.owner_queue. When its last pending request is answered (or
--   expires) waiting turns false and the prompt becomes claimable, by the
--   trigger prompts_claimable_resume, as a newly queued prompt does.
-- * convo.input_requests: one request per tool call. The tool call stays
--   started while its request is pending.

ALTER TABLE convo.prompts ADD COLUMN waiting boolean NOT NULL DEFAULT false;
-- NOT VALID: every row has waiting = false, so there is nothing to check,
-- and no scan of the whole table under its lock; new rows are checked.
ALTER TABLE convo.prompts ADD CONSTRAINT prompts_waiting_check
    CHECK (NOT waiting OR (status = 'queued' AND worker IS NULL)) NOT VALID;

-- Claimable: queued, held by no worker, and not waiting for an answer.
DROP INDEX convo.prompts_claimable_idx;
CREATE INDEX prompts_claimable_idx ON convo.prompts (owner_id, created_at, id)
    WHERE status = 'queued' AND worker IS NULL AND NOT waiting;

DROP TRIGGER prompts_claimable_insert ON convo.prompts;
DROP TRIGGER prompts_claimable_release ON convo.prompts;
CREATE TRIGGER prompts_claimable_insert AFTER INSERT ON convo.prompts
    FOR EACH ROW WHEN (NEW.status = 'queued' AND NEW.worker IS NULL AND NOT NEW.waiting)
    EXECUTE FUNCTION convo._prompt_claimable();
-- A claim handed back; not a prompt that its worker parks (wait_prompt).
CREATE TRIGGER prompts_claimable_release AFTER UPDATE OF worker ON convo.prompts
    FOR EACH ROW WHEN (NEW.status = 'queued' AND NEW.worker IS NULL AND OLD.worker IS NOT NULL AND NOT NEW.waiting)
    EXECUTE FUNCTION convo._prompt_claimable();
-- A waiting prompt whose last request was answered or expired.
CREATE TRIGGER prompts_claimable_resume AFTER UPDATE OF waiting ON convo.prompts
    FOR EACH ROW WHEN (OLD.waiting AND NOT NEW.waiting AND NEW.status = 'queued' AND NEW.worker IS NULL)
    EXECUTE FUNCTION convo._prompt_claimable();

-- An input request: what a tool call waits for from a person. kind and
-- request are set by the worker (request_input); status, answer and
-- answered_at by the answer (answer_input), the expiry (expire_leases) or
-- the end of the tool call or its prompt (cancelled). answered_at is when
-- the request stopped being pending, however it did. claimed_by and
-- claim_expires_at: the browser tab that runs a client tool (claim_input).
-- Rows go with their tool call (ON DELETE CASCADE), which goes with its
-- prompt and conversation.
CREATE TABLE convo.input_requests (
    tool_call_id     uuid        PRIMARY KEY REFERENCES convo.tool_calls (id) ON DELETE CASCADE,
    conversation_id  uuid        NOT NULL,
    prompt_id        uuid        NOT NULL,
    kind             text        NOT NULL CHECK (kind IN ('approval', 'client_tool', 'question')),
    request          jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(request) = 'object'),
    status           text        NOT NULL DEFAULT 'pending'
                                 CHECK (status IN ('pending', 'answered', 'expired', 'cancelled')),
    answer           jsonb       CHECK (answer IS NULL OR jsonb_typeof(answer) = 'object'),
    answered_at      timestamptz,
    expires_at       timestamptz,
    claimed_by       text        CHECK (claimed_by <> ''),
    claim_expires_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CHECK ((status = 'pending') = (answered_at IS NULL)),
    CHECK ((status IN ('answered', 'expired')) = (answer IS NOT NULL)),
    CHECK ((claimed_by IS NULL) = (claim_expires_at IS NULL))
);
-- A prompt's requests (wait_prompt, answer_input, prompt_inputs).
CREATE INDEX input_requests_prompt_idx ON convo.input_requests (prompt_id);
-- The expiry sweep (expire_leases).
CREATE INDEX input_requests_expiry_idx ON convo.input_requests (expires_at)
    WHERE status = 'pending' AND expires_at IS NOT NULL;

-- +goose Down
-- A prompt waiting for an answer cannot wait without this migration: it
-- fails (its open tool calls fail, its requests are cancelled), before the
-- functions it needs are replaced.
SELECT convo._finish_prompt(p.id, 'failed', 'input requests were rolled back (migration 00014 down) while the prompt waited for an answer')
  FROM convo.prompts p WHERE p.waiting ORDER BY p.conversation_id, p.created_at;

-- The functions as they were before this migration (db/functions holds
-- the current ones), then the new ones dropped.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._end_tool_call(p_tool_call_id uuid, p_output text, p_error text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_call convo.tool_calls;
BEGIN
    UPDATE convo.tool_calls
       SET status = CASE WHEN p_error IS NULL THEN 'completed' ELSE 'failed' END,
           output = convo._tool_output(id) || coalesce(p_output, ''),
           error = p_error,
           ended_at = now()
     WHERE id = p_tool_call_id
    RETURNING * INTO v_call;
    IF p_error IS NULL THEN
        PERFORM convo._append_event(v_call.conversation_id, 'toolCallCompleted',
            jsonb_build_object('toolCall', convo._tool_call_json(v_call)),
            v_call.prompt_id, v_call.block_id, v_call.id);
    ELSE
        PERFORM convo._append_event(v_call.conversation_id, 'toolCallFailed',
            jsonb_build_object('toolCall', convo._tool_call_json(v_call), 'error', p_error),
            v_call.prompt_id, v_call.block_id, v_call.id);
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._finish_prompt(p_prompt_id uuid, p_status text, p_error text) RETURNS convo.prompts
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt  convo.prompts;
    v_message convo.messages;
    v_block   convo.blocks;
    v_call_id uuid;
    v_kind    text;
BEGIN
    FOR v_call_id IN
        SELECT t.id FROM convo.tool_calls t
         WHERE t.prompt_id = p_prompt_id AND t.status IN ('started', 'running')
         ORDER BY t.started_at, t.id
    LOOP
        PERFORM convo._end_tool_call(v_call_id, NULL, 'prompt ' || p_status || ' before the tool call finished');
    END LOOP;
    FOR v_block IN
        SELECT * FROM convo.blocks b
         WHERE b.prompt_id = p_prompt_id AND b.status = 'streaming'
         ORDER BY b.position
    LOOP
        PERFORM convo._end_block(v_block, NULL, false);
    END LOOP;

    UPDATE convo.prompts
       SET status = p_status, error = p_error, ended_at = now(), lease_expires_at = NULL
     WHERE id = p_prompt_id
    RETURNING * INTO v_prompt;
    v_kind := CASE p_status WHEN 'completed' THEN 'promptCompleted'
                            WHEN 'failed' THEN 'promptFailed'
                            ELSE 'promptCancelled' END;
    PERFORM convo._append_event(v_prompt.conversation_id, v_kind,
        convo._object(jsonb_build_object('prompt', convo._prompt_json(v_prompt), 'error', p_error)),
        v_prompt.id);

    UPDATE convo.messages SET status = p_status, updated_at = now()
     WHERE id = v_prompt.message_id
    RETURNING * INTO v_message;
    PERFORM convo._append_event(v_prompt.conversation_id, 'messageUpdated',
        jsonb_build_object('message', convo._message_json(v_message)), v_prompt.id);

    PERFORM convo._refresh_active_prompt(v_prompt.conversation_id);
    RETURN v_prompt;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.expire_leases() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_candidate convo.prompts;
    v_count integer := 0;
BEGIN
    FOR v_candidate IN
        SELECT * FROM convo.prompts
         WHERE status = 'running' AND lease_expires_at < now()
         ORDER BY lease_expires_at
         LIMIT 100
    LOOP
        -- A conversation locked by someone else (a worker's batch, which
        -- may hold many, in another order) waits for the next round:
        -- expire_leases never waits for a lock while it holds others.
        PERFORM 1 FROM convo.conversations c WHERE c.id = v_candidate.conversation_id FOR NO KEY UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        -- Recheck under the lock: the worker may have finished or heartbeated.
        PERFORM 1 FROM convo.prompts
         WHERE id = v_candidate.id AND status = 'running' AND lease_expires_at < now();
        IF FOUND THEN
            PERFORM convo._finish_prompt(v_candidate.id, 'failed',
                format('lease expired: worker %s stopped heartbeating', v_candidate.worker));
            v_count := v_count + 1;
        END IF;
    END LOOP;
    -- Claims never started: handed back in the order of their owners, so
    -- that two calls at once take the owners' rows of convo.owner_queue
    -- (trigger prompts_claimable_release) in one order.
    FOR v_candidate IN
        SELECT * FROM convo.prompts
         WHERE status = 'queued' AND worker IS NOT NULL AND lease_expires_at < now()
         ORDER BY owner_id, lease_expires_at
         LIMIT 100
    LOOP
        UPDATE convo.prompts p
           SET worker = NULL, lease_seconds = NULL, lease_expires_at = NULL
         WHERE p.id = (SELECT q.id FROM convo.prompts q
                        WHERE q.id = v_candidate.id AND q.status = 'queued'
                          AND q.worker IS NOT NULL AND q.lease_expires_at < now()
                          FOR NO KEY UPDATE SKIP LOCKED);
    END LOOP;
    RETURN v_count;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._claim_next(p_worker text, p_lease_seconds integer, p_idle_only boolean,
                                             p_max integer DEFAULT 1) RETURNS uuid[]
LANGUAGE plpgsql AS $$
DECLARE
    v_owner   text;
    v_since   timestamptz;
    v_idle    boolean;
    v_alone   boolean;
    v_ids     uuid[];
    -- owners this call looked at and could not take a prompt from
    v_skip    text[] := '{}';
BEGIN
    LOOP
        v_idle := true;
        v_alone := false;
        SELECT q.owner_id, q.waiting_since INTO v_owner, v_since
          FROM convo.owner_queue q
         WHERE q.waiting_since IS NOT NULL
           AND q.owner_id <> ALL (v_skip)
           AND NOT EXISTS (SELECT 1 FROM convo.prompts h
                            WHERE h.owner_id = q.owner_id
                              AND (h.status = 'running' OR (h.status = 'queued' AND h.worker IS NOT NULL)))
         ORDER BY q.last_claimed_at NULLS FIRST, q.waiting_since, q.owner_id
         LIMIT 1
           FOR UPDATE OF q SKIP LOCKED;
        IF NOT FOUND AND NOT p_idle_only THEN
            -- Every waiting owner holds prompts. One alone is the pick; of
            -- several, the one who holds the fewest.
            v_idle := false;
            SELECT count(*) = 1 INTO v_alone
              FROM (SELECT 1 FROM convo.owner_queue q
                     WHERE q.waiting_since IS NOT NULL AND q.owner_id <> ALL (v_skip)
                     LIMIT 2) w;
            IF v_alone THEN
                SELECT q.owner_id, q.waiting_since INTO v_owner, v_since
                  FROM convo.owner_queue q
                 WHERE q.waiting_since IS NOT NULL AND q.owner_id <> ALL (v_skip)
                   FOR UPDATE OF q SKIP LOCKED;
            ELSE
                SELECT q.owner_id, q.waiting_since INTO v_owner, v_since
                  FROM (SELECT h.owner_id, count(*) AS held FROM convo.prompts h
                         WHERE h.status = 'running' OR (h.status = 'queued' AND h.worker IS NOT NULL)
                         GROUP BY h.owner_id) c
                  JOIN convo.owner_queue q ON q.owner_id = c.owner_id
                 WHERE q.waiting_since IS NOT NULL
                   AND q.owner_id <> ALL (v_skip)
                 ORDER BY c.held, q.last_claimed_at NULLS FIRST, q.waiting_since, q.owner_id
                 LIMIT 1
                   FOR UPDATE OF q SKIP LOCKED;
            END IF;
        END IF;
        IF NOT FOUND THEN
            RETURN '{}';
        END IF;
        v_skip := v_skip || v_owner;
        -- The owner's row is ours now, so no other claim serves it; but one
        -- may have done so since this statement's snapshot.
        CONTINUE WHEN v_idle AND EXISTS (
            SELECT 1 FROM convo.prompts h
             WHERE h.owner_id = v_owner
               AND (h.status = 'running' OR (h.status = 'queued' AND h.worker IS NOT NULL)));
        -- No claimable prompt of the owner is older than waiting_since
        -- (the trigger and the update below keep it so): the scans start
        -- there, past the prompts claimed before, whose index entries
        -- outlive them until a vacuum.
        SELECT coalesce(array_agg(c.id ORDER BY c.created_at, c.id), '{}') INTO v_ids
          FROM (SELECT p.id, p.created_at FROM convo.prompts p
                 WHERE p.owner_id = v_owner AND p.status = 'queued' AND p.worker IS NULL
                   AND p.created_at >= v_since
                 ORDER BY p.created_at, p.id
                 LIMIT CASE WHEN v_alone THEN greatest(p_max, 1) ELSE 1 END
                   FOR NO KEY UPDATE SKIP LOCKED) c;
        UPDATE convo.prompts p
           SET worker = p_worker,
               lease_seconds = p_lease_seconds,
               lease_expires_at = now() + make_interval(secs => p_lease_seconds),
               attempts = p.attempts + 1
         WHERE p.id = ANY (v_ids);
        -- The owner's turn moves on (clock_timestamp, not now(): the
        -- claims of one transaction must still order their owners), and
        -- it waits from its next claimable prompt, if any. An owner whose
        -- waiting prompts were cancelled or deleted stops waiting here.
        UPDATE convo.owner_queue q
           SET last_claimed_at = CASE WHEN v_ids = '{}' THEN q.last_claimed_at ELSE clock_timestamp() END,
               waiting_since = (SELECT min(p.created_at) FROM convo.prompts p
                                 WHERE p.owner_id = v_owner AND p.status = 'queued' AND p.worker IS NULL
                                   AND p.created_at >= v_since)
         WHERE q.owner_id = v_owner;
        IF v_ids <> '{}' THEN
            RETURN v_ids;
        END IF;
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.start_prompt(prompt_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt  convo.prompts;
    v_message convo.messages;
BEGIN
    SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = start_prompt.prompt_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'start_prompt: prompt % does not exist', start_prompt.prompt_id USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._lock_conversation(v_prompt.conversation_id);
    UPDATE convo.prompts p
       SET status = 'running', started_at = now(),
           lease_expires_at = now() + make_interval(secs => coalesce(p.lease_seconds, 30))
     WHERE p.id = start_prompt.prompt_id AND p.status = 'queued'
    RETURNING * INTO v_prompt;
    IF NOT FOUND THEN
        SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = start_prompt.prompt_id;
        RAISE EXCEPTION 'start_prompt: prompt % is %, not queued', v_prompt.id, v_prompt.status
            USING ERRCODE = 'CV002';
    END IF;
    PERFORM convo._append_event(v_prompt.conversation_id, 'promptStarted',
        jsonb_build_object('prompt', convo._prompt_json(v_prompt)), v_prompt.id);
    UPDATE convo.messages SET status = 'processing', updated_at = now()
     WHERE id = v_prompt.message_id
    RETURNING * INTO v_message;
    PERFORM convo._append_event(v_prompt.conversation_id, 'messageUpdated',
        jsonb_build_object('message', convo._message_json(v_message)), v_prompt.id);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._batch_apply(p_worker text, p_prompt_id uuid, p_op jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_kind     text := p_op->>'op';
    v_block_id uuid;
    v_call_id  uuid;
    v_seq      integer;
BEGIN
    CASE v_kind
    WHEN 'append' THEN
        v_block_id := convo._batch_uuid(p_op, 'block');
        IF jsonb_typeof(p_op->'seq') IS DISTINCT FROM 'number' THEN
            RAISE EXCEPTION 'write_batch: op "append" needs "seq", the number of this append to its block (1, 2, 3, …)'
                USING ERRCODE = 'CV003';
        END IF;
        v_seq := (p_op->>'seq')::integer;
        PERFORM convo._batch_owner(p_prompt_id, v_block_id, NULL);
        PERFORM convo.append_block(v_block_id, coalesce(p_op->>'text', ''), v_seq);
    WHEN 'start_prompt' THEN
        PERFORM convo.start_prompt(p_prompt_id);
    WHEN 'heartbeat' THEN
        IF NOT convo.heartbeat(p_prompt_id, p_worker) THEN
            RAISE EXCEPTION 'write_batch: prompt % is no longer held by worker %', p_prompt_id, p_worker
                USING ERRCODE = 'CV002';
        END IF;
    WHEN 'start_block' THEN
        PERFORM convo._start_block(p_prompt_id, convo._batch_uuid(p_op, 'block'), p_op->>'type',
                                   coalesce(p_op->'metadata', '{}'));
    WHEN 'end_block' THEN
        v_block_id := convo._batch_uuid(p_op, 'block');
        PERFORM convo._batch_owner(p_prompt_id, v_block_id, NULL);
        PERFORM convo.end_block(v_block_id, p_op->'metadata');
    WHEN 'start_tool_call' THEN
        v_block_id := convo._batch_uuid(p_op, 'block');
        PERFORM convo._batch_owner(p_prompt_id, v_block_id, NULL);
        PERFORM convo._start_tool_call(v_block_id, convo._batch_uuid(p_op, 'toolCall'), p_op->>'name', p_op->'input');
    WHEN 'tool_progress' THEN
        v_call_id := convo._batch_uuid(p_op, 'toolCall');
        PERFORM convo._batch_owner(p_prompt_id, NULL, v_call_id);
        PERFORM convo.tool_call_progress(v_call_id, coalesce(p_op->>'text', ''));
    WHEN 'complete_tool_call' THEN
        v_call_id := convo._batch_uuid(p_op, 'toolCall');
        PERFORM convo._batch_owner(p_prompt_id, NULL, v_call_id);
        PERFORM convo.complete_tool_call(v_call_id, p_op->>'output');
    WHEN 'fail_tool_call' THEN
        v_call_id := convo._batch_uuid(p_op, 'toolCall');
        PERFORM convo._batch_owner(p_prompt_id, NULL, v_call_id);
        PERFORM convo.fail_tool_call(v_call_id, p_op->>'error');
    WHEN 'complete_prompt' THEN
        PERFORM convo.complete_prompt(p_prompt_id);
    WHEN 'fail_prompt' THEN
        PERFORM convo.fail_prompt(p_prompt_id, p_op->>'error');
    END CASE;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.write_batch(worker text, batch bigint, ops jsonb, lane integer DEFAULT 0)
RETURNS TABLE (prompt_id uuid, op_index integer, code text, message text)
LANGUAGE plpgsql AS $$
DECLARE
    v_kinds    constant text[] := ARRAY['start_prompt', 'heartbeat', 'start_block', 'append', 'end_block',
                                        'start_tool_call', 'tool_progress', 'complete_tool_call',
                                        'fail_tool_call', 'complete_prompt', 'fail_prompt'];
    v_mark     convo.worker_batches;
    v_notify   text := current_setting('convo.notify_events', true);
    v_uuid     constant text := convo._uuid_pattern();
    -- the batch's prompts, and the index of each one's first op
    v_prompts  uuid[];
    v_firsts   integer[];
    v_counts   integer[];
    -- v_done[i + 1]: ops[i] was applied by the one statement for appends
    -- (below)
    v_done     boolean[];
    v_status   text;
    v_holder   text;
    -- the batch's conversations and their last seq before it
    v_convs    uuid[];
    v_seqs     bigint[];
    -- refused: prompt id -> {"index", "code", "message"}
    v_refused  jsonb := '{}';
    v_id       uuid;
    v_op       jsonb;
    v_index    integer;
    v_limit    integer;
BEGIN
    IF worker IS NULL OR worker = '' THEN
        RAISE EXCEPTION 'write_batch: worker must be a non-empty name' USING ERRCODE = 'CV003';
    END IF;
    IF lane IS NULL OR lane < 0 THEN
        RAISE EXCEPTION 'write_batch: lane must be 0 or more, got %', coalesce(lane::text, 'NULL')
            USING ERRCODE = 'CV003';
    END IF;
    IF batch IS NULL THEN
        RAISE EXCEPTION 'write_batch: batch must be a number that grows with each call of the worker'
            USING ERRCODE = 'CV003';
    END IF;
    IF ops IS NULL OR jsonb_typeof(ops) <> 'array' THEN
        RAISE EXCEPTION 'write_batch: ops must be a JSON array of ops, got %', coalesce(jsonb_typeof(ops), 'NULL')
            USING ERRCODE = 'CV003';
    END IF;

    -- Exactly once: the worker's batches are applied one at a time, in
    -- the order of their numbers.
    INSERT INTO convo.worker_batches AS w (worker, lane, batch) VALUES (write_batch.worker, write_batch.lane, -1)
        ON CONFLICT ON CONSTRAINT worker_batches_pkey DO NOTHING;
    IF FOUND THEN
        -- A new worker: forget the marks of workers silent for a day (a
        -- worker sends a batch again within seconds).
        DELETE FROM convo.worker_batches w WHERE w.written_at < now() - interval '1 day';
    END IF;
    SELECT * INTO v_mark FROM convo.worker_batches w
     WHERE w.worker = write_batch.worker AND w.lane = write_batch.lane
       FOR UPDATE;
    IF v_mark.batch = write_batch.batch THEN
        RETURN QUERY
        SELECT (r->>'prompt')::uuid, (r->>'index')::integer, r->>'code', r->>'message'
          FROM jsonb_array_elements(v_mark.refused) r;
        RETURN;
    ELSIF v_mark.batch > write_batch.batch THEN
        RAISE EXCEPTION 'write_batch: batch % of worker % (lane %) is older than batch %, which was applied already',
            write_batch.batch, write_batch.worker, write_batch.lane, v_mark.batch USING ERRCODE = 'CV002',
            HINT = 'number each call of a worker higher than the one before';
    END IF;

    -- The shape of every op.
    SELECT x.o, (x.i - 1)::integer INTO v_op, v_index
      FROM jsonb_array_elements(ops) WITH ORDINALITY AS x(o, i)
     WHERE jsonb_typeof(x.o) <> 'object'
        OR NOT coalesce(x.o->>'op' = ANY (v_kinds), false)
        OR NOT coalesce(x.o->>'prompt' ~* v_uuid, false)
     ORDER BY x.i
     LIMIT 1;
    IF FOUND THEN
        IF jsonb_typeof(v_op) <> 'object' THEN
            RAISE EXCEPTION 'write_batch: ops[%] must be a JSON object, got %', v_index, jsonb_typeof(v_op)
                USING ERRCODE = 'CV003';
        ELSIF NOT coalesce(v_op->>'op' = ANY (v_kinds), false) THEN
            RAISE EXCEPTION 'write_batch: ops[%].op must be one of %, got %', v_index,
                array_to_string(v_kinds, ', '), coalesce((v_op->'op')::text, 'nothing') USING ERRCODE = 'CV003';
        END IF;
        RAISE EXCEPTION 'write_batch: ops[%].prompt must be a uuid, got %', v_index,
            coalesce((v_op->'prompt')::text, 'nothing') USING ERRCODE = 'CV003';
    END IF;
    -- The batch's prompts, each with the index of its first op and its
    -- number of ops.
    SELECT array_agg(f.id ORDER BY f.id), array_agg(f.first ORDER BY f.id), array_agg(f.n ORDER BY f.id)
      INTO v_prompts, v_firsts, v_counts
      FROM (SELECT (x.o->>'prompt')::uuid AS id, (min(x.i) - 1)::integer AS first, count(*)::integer AS n
              FROM jsonb_array_elements(ops) WITH ORDINALITY AS x(o, i)
             GROUP BY 1) f;

    -- Lock the batch's conversations in one order, so that two batches
    -- writing to the same conversations (the two replies of an A/B
    -- comparison held by two processes) never deadlock.
    SELECT array_agg(l.id ORDER BY l.id), array_agg(l.last_seq ORDER BY l.id) INTO v_convs, v_seqs
      FROM (SELECT c.id, c.last_seq FROM convo.conversations c
             WHERE c.id IN (SELECT p.conversation_id FROM convo.prompts p WHERE p.id = ANY (v_prompts))
             ORDER BY c.id
               FOR NO KEY UPDATE OF c) l;
    -- And the prompts still queued or running, so that no claim takes
    -- one of them (a queued prompt whose lease ran out) while the batch
    -- writes it: claims skip locked prompts. (Finished ones are refused
    -- below, and compaction, which locks them, is not waited for.)
    PERFORM 1 FROM convo.prompts p
     WHERE p.id = ANY (v_prompts) AND p.status IN ('queued', 'running')
     ORDER BY p.id
       FOR NO KEY UPDATE OF p;

    -- Refuse up front the prompts that are gone, finished or not worker's:
    -- the usual refusals (a cancel, a deleted conversation, a lost lease)
    -- cost no second pass.
    FOR v_id, v_index, v_status, v_holder IN
        SELECT u.id, u.first, p.status, p.worker
          FROM unnest(v_prompts, v_firsts) AS u(id, first)
          LEFT JOIN convo.prompts p ON p.id = u.id
         WHERE p.id IS NULL OR p.status NOT IN ('queued', 'running') OR p.worker IS DISTINCT FROM write_batch.worker
    LOOP
        v_refused := v_refused || jsonb_build_object(v_id::text, jsonb_build_object('index', v_index,
            'code', CASE WHEN v_status IS NULL THEN 'CV001' ELSE 'CV002' END,
            'message', CASE
                WHEN v_status IS NULL THEN format('write_batch: prompt %s does not exist', v_id)
                WHEN v_status NOT IN ('queued', 'running') THEN format('write_batch: prompt %s is %s, not running', v_id, v_status)
                ELSE format('write_batch: prompt %s is held by %s, not by %s', v_id, coalesce(v_holder, 'no worker'), write_batch.worker)
            END));
    END LOOP;

    PERFORM set_config('convo.notify_events', 'off', true);

    -- The common op in one statement: mid-reply, most prompts of a batch
    -- have one op, an append to the block that took their conversation's
    -- latest delta (conversations.delta_block_id, kept true by triggers:
    -- the block streams and its prompt runs), with the next delta_seq. It
    -- is applied here as append_block's common path would apply it; every
    -- other op goes through the loop below.
    v_done := array_fill(false, ARRAY[jsonb_array_length(ops)]);
    FOR v_index IN
        WITH single AS (
            SELECT (x.o->>'prompt')::uuid AS prompt_id, (x.o->>'block')::uuid AS block_id,
                   x.o->>'text' AS delta, (x.o->>'seq')::integer AS delta_seq, (x.i - 1)::integer AS i
              FROM unnest(v_prompts, v_firsts, v_counts) AS u(id, first, n)
              JOIN LATERAL (SELECT ops->u.first AS o, u.first + 1 AS i) x ON true
             WHERE u.n = 1
               AND x.o->>'op' = 'append'
               AND coalesce(x.o->>'text', '') <> ''
               AND coalesce(x.o->>'block' ~* v_uuid, false)
               AND jsonb_typeof(x.o->'seq') = 'number' AND x.o->>'seq' ~ '^[0-9]{1,9}$'
               AND NOT v_refused ? u.id::text),
        target AS (
            SELECT s.*, b.conversation_id, b.message_id
              FROM single s
              JOIN convo.blocks b ON b.id = s.block_id AND b.prompt_id = s.prompt_id),
        counted AS (
            UPDATE convo.conversations c
               SET last_seq = c.last_seq + 1, delta_count = c.delta_count + 1
              FROM target t
             WHERE c.id = t.conversation_id
               AND c.delta_block_id = t.block_id
               AND t.delta_seq = c.delta_count + 1
            RETURNING c.id, c.last_seq, t.prompt_id, t.message_id, t.block_id, t.delta, t.i),
        inserted AS (
            INSERT INTO convo.events (conversation_id, seq, kind, prompt_id, block_id, payload)
            SELECT k.id, k.last_seq, 'blockDelta', k.prompt_id, k.block_id,
                   jsonb_build_object('promptId', k.prompt_id, 'messageId', k.message_id,
                                      'blockId', k.block_id, 'content', k.delta)
              FROM counted k)
        SELECT k.i FROM counted k
    LOOP
        v_done[v_index + 1] := true;
    END LOOP;

    -- Apply. An op that raises rolls back this attempt (one subtransaction,
    -- so the transaction never holds more than one), its prompt is refused
    -- from that op on, and the batch is applied again without those ops.
    -- Each pass refuses one more op, so the loop ends. Errors that are not
    -- about an op (a deadlock, a shutdown, an out-of-memory) abort the
    -- whole call.
    LOOP
        BEGIN
            FOR v_op, v_index IN SELECT o, (i - 1)::integer FROM jsonb_array_elements(ops) WITH ORDINALITY AS x(o, i) LOOP
                CONTINUE WHEN v_done[v_index + 1];
                v_id := (v_op->>'prompt')::uuid;
                IF v_refused <> '{}' THEN
                    v_limit := (v_refused->v_id::text->>'index')::integer;
                    CONTINUE WHEN v_limit IS NOT NULL AND v_index >= v_limit;
                END IF;
                PERFORM convo._batch_apply(write_batch.worker, v_id, v_op);
            END LOOP;
            EXIT;
        EXCEPTION WHEN OTHERS THEN
            IF left(SQLSTATE, 2) IN ('40', '53', '57', '58', 'XX') THEN
                RAISE;
            END IF;
            v_refused := v_refused || jsonb_build_object(v_id::text, jsonb_build_object('index', v_index,
                'code', SQLSTATE, 'message', SQLERRM));
        END;
    END LOOP;
    PERFORM set_config('convo.notify_events', coalesce(v_notify, ''), true);

    IF v_notify IS DISTINCT FROM 'off' THEN
        PERFORM convo._notify_event(c.id, c.last_seq)
           FROM unnest(v_convs, v_seqs) AS l(id, last_seq)
           JOIN convo.conversations c ON c.id = l.id
          WHERE c.last_seq > l.last_seq;
    END IF;

    UPDATE convo.worker_batches w
       SET batch = write_batch.batch, written_at = now(),
           refused = (SELECT coalesce(jsonb_agg(r.value || jsonb_build_object('prompt', r.key) ORDER BY (r.value->>'index')::integer), '[]')
                        FROM jsonb_each(v_refused) r)
     WHERE w.worker = write_batch.worker AND w.lane = write_batch.lane
    RETURNING w.refused INTO v_mark.refused;
    RETURN QUERY
    SELECT (r->>'prompt')::uuid, (r->>'index')::integer, r->>'code', r->>'message'
      FROM jsonb_array_elements(v_mark.refused) r;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.send_message(p_owner_id text, p_conversation_id uuid, p_text text, p_model_configs jsonb)
RETURNS TABLE (conversation_id uuid, user_message_id uuid, assistant_message_ids uuid[], prompt_ids uuid[],
               comparison_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv       convo.conversations;
    v_user       convo.messages;
    v_assistant  convo.messages;
    v_prompt     convo.prompts;
    v_block      convo.blocks;
    v_config     jsonb;
    v_slot       integer := 0;
    v_comparison uuid;
    v_messages   uuid[] := '{}';
    v_prompts    uuid[] := '{}';
BEGIN
    IF p_text IS NULL OR NOT convo._has_visible(p_text) THEN
        RAISE EXCEPTION 'send_message: text must not be empty or only whitespace, control, zero-width or bidi control characters'
            USING ERRCODE = 'CV003';
    END IF;
    IF jsonb_typeof(p_model_configs) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_model_configs) NOT BETWEEN 1 AND 2
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_model_configs) c WHERE jsonb_typeof(c.value) <> 'object') THEN
        RAISE EXCEPTION 'send_message: model_configs must be a JSON array of one or two objects' USING ERRCODE = 'CV003';
    END IF;

    -- The quota, before anything is written or locked.
    PERFORM convo._check_prompt_quota(p_owner_id, jsonb_array_length(p_model_configs), 'send_message');

    IF p_conversation_id IS NULL THEN
        INSERT INTO convo.conversations (owner_id) VALUES (p_owner_id) RETURNING * INTO v_conv;
    ELSE
        v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'send_message');
    END IF;

    INSERT INTO convo.messages (conversation_id, position, role, status)
    VALUES (v_conv.id, v_conv.last_seq + 1, 'user', 'completed')
    RETURNING * INTO v_user;
    INSERT INTO convo.blocks (conversation_id, message_id, position, block_type, status, content, ended_at)
    VALUES (v_conv.id, v_user.id, 0, 'text', 'completed', p_text, now())
    RETURNING * INTO v_block;
    PERFORM convo._append_event(v_conv.id, 'messageCreated', jsonb_build_object('message',
        convo._message_json(v_user) || jsonb_build_object('blocks', jsonb_build_array(jsonb_build_object(
            'id', v_block.id, 'blockType', v_block.block_type, 'content', v_block.content,
            'metadata', v_block.metadata, 'status', v_block.status, 'position', v_block.position)))));

    -- Create every prompt (and the comparison) first, then announce them,
    -- so each message's first event already carries its comparison.
    FOR v_config IN SELECT c.value FROM jsonb_array_elements(p_model_configs) c LOOP
        v_slot := v_slot + 1;
        INSERT INTO convo.messages (conversation_id, position, role, status, comparison_slot)
        VALUES (v_conv.id, v_user.position + v_slot, 'assistant', 'pending',
                CASE WHEN jsonb_array_length(p_model_configs) = 2 THEN chr(ascii('a') + v_slot - 1) END)
        RETURNING * INTO v_assistant;
        INSERT INTO convo.prompts (conversation_id, message_id, model_config)
        VALUES (v_conv.id, v_assistant.id, v_config)
        RETURNING * INTO v_prompt;
        v_messages := v_messages || v_assistant.id;
        v_prompts := v_prompts || v_prompt.id;
    END LOOP;
    IF v_slot = 2 THEN
        INSERT INTO convo.comparisons (conversation_id, user_message_id, prompt_a, prompt_b)
        VALUES (v_conv.id, v_user.id, v_prompts[1], v_prompts[2])
        RETURNING id INTO v_comparison;
        UPDATE convo.messages m SET comparison_id = v_comparison WHERE m.id = ANY (v_messages);
    END IF;
    FOR i IN 1 .. v_slot LOOP
        SELECT * INTO v_assistant FROM convo.messages m WHERE m.id = v_messages[i];
        SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = v_prompts[i];
        PERFORM convo._append_event(v_conv.id, 'messageCreated',
            jsonb_build_object('message', convo._message_json(v_assistant)), v_prompt.id);
        PERFORM convo._append_event(v_conv.id, 'promptQueued',
            jsonb_build_object('prompt', convo._prompt_json(v_prompt)), v_prompt.id);
        PERFORM convo._notify_prompt('queued', v_prompt.id);
    END LOOP;

    UPDATE convo.conversations c
       SET title = CASE WHEN c.title = '' THEN convo._title_from_text(p_text) ELSE c.title END,
           active_prompt_id = v_prompts[1],
           last_message_at = now(),
           updated_at = now()
     WHERE c.id = v_conv.id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'conversationUpdated',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));

    RETURN QUERY SELECT v_conv.id, v_user.id, v_messages, v_prompts, v_comparison;
END;
$$;
-- +goose StatementEnd

DROP FUNCTION convo.request_input(uuid, text, jsonb, timestamptz);
DROP FUNCTION convo._request_input(uuid, text, jsonb, timestamptz);
DROP FUNCTION convo.wait_prompt(uuid, text);
DROP FUNCTION convo.prompt_inputs(uuid);
DROP FUNCTION convo.answer_input(text, uuid, jsonb);
DROP FUNCTION convo.claim_input(text, uuid, text, integer);
DROP FUNCTION convo._input_event(convo.input_requests, text, jsonb);
DROP FUNCTION convo._input_answered(convo.input_requests);
DROP FUNCTION convo._resume_prompt(uuid);
DROP FUNCTION convo._check_input_request(text, jsonb);
DROP FUNCTION convo._owned_input(text, uuid, text);
DROP FUNCTION convo._pending_input(convo.input_requests, text);
DROP FUNCTION convo._check_input_answer(text, jsonb, jsonb);
DROP FUNCTION convo._input_request_json(convo.input_requests);
DROP TABLE convo.input_requests;

DROP TRIGGER prompts_claimable_resume ON convo.prompts;
DROP TRIGGER prompts_claimable_insert ON convo.prompts;
DROP TRIGGER prompts_claimable_release ON convo.prompts;
CREATE TRIGGER prompts_claimable_insert AFTER INSERT ON convo.prompts
    FOR EACH ROW WHEN (NEW.status = 'queued' AND NEW.worker IS NULL)
    EXECUTE FUNCTION convo._prompt_claimable();
CREATE TRIGGER prompts_claimable_release AFTER UPDATE OF worker ON convo.prompts
    FOR EACH ROW WHEN (NEW.status = 'queued' AND NEW.worker IS NULL AND OLD.worker IS NOT NULL)
    EXECUTE FUNCTION convo._prompt_claimable();
DROP INDEX convo.prompts_claimable_idx;
CREATE INDEX prompts_claimable_idx ON convo.prompts (owner_id, created_at, id)
    WHERE status = 'queued' AND worker IS NULL;
ALTER TABLE convo.prompts DROP CONSTRAINT prompts_waiting_check;
ALTER TABLE convo.prompts DROP COLUMN waiting;

