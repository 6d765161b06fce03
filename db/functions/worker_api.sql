-- The SQL worker API: what a worker in any language calls to run a prompt
-- (docs/worker-api.md is the reference).
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), so a change to a function is
-- an edit here. See db/README.md.

-- _set_active_prompt points the conversation at its newest unfinished prompt
-- and, when that changed, appends conversationUpdated.
CREATE OR REPLACE FUNCTION convo._refresh_active_prompt(p_conversation_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
BEGIN
    UPDATE convo.conversations c
       SET active_prompt_id = a.id, updated_at = now()
      FROM (SELECT (SELECT p.id FROM convo.prompts p
                     WHERE p.conversation_id = p_conversation_id
                       AND p.status IN ('queued', 'running')
                     ORDER BY p.created_at DESC, p.id DESC LIMIT 1) AS id) a
     WHERE c.id = p_conversation_id
       AND c.active_prompt_id IS DISTINCT FROM a.id
    RETURNING c.* INTO v_conv;
    IF FOUND THEN
        PERFORM convo._append_event(p_conversation_id, 'conversationUpdated',
            jsonb_build_object('conversation', convo._conversation_json(v_conv)));
    END IF;
END;
$$;

-- _check_metadata raises CV003 unless metadata is NULL or a JSON object.
CREATE OR REPLACE FUNCTION convo._check_metadata(p_metadata jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_metadata IS NOT NULL AND jsonb_typeof(p_metadata) <> 'object' THEN
        RAISE EXCEPTION 'metadata must be a JSON object, got %', jsonb_typeof(p_metadata)
            USING ERRCODE = 'CV003';
    END IF;
END;
$$;

-- _running_prompt locks the prompt's conversation and returns the prompt,
-- raising CV001 when it does not exist and CV002 unless it is running.
CREATE OR REPLACE FUNCTION convo._running_prompt(p_prompt_id uuid, p_action text) RETURNS convo.prompts
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt convo.prompts;
BEGIN
    SELECT * INTO v_prompt FROM convo.prompts WHERE id = p_prompt_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: prompt % does not exist', p_action, p_prompt_id USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._lock_conversation(v_prompt.conversation_id);
    SELECT * INTO v_prompt FROM convo.prompts WHERE id = p_prompt_id;
    IF v_prompt.status = 'queued' THEN
        RAISE EXCEPTION '%: prompt % is queued, not running', p_action, p_prompt_id
            USING ERRCODE = 'CV002', HINT = 'call convo.start_prompt first';
    ELSIF v_prompt.status <> 'running' THEN
        RAISE EXCEPTION '%: prompt % is %, not running', p_action, p_prompt_id, v_prompt.status
            USING ERRCODE = 'CV002';
    END IF;
    RETURN v_prompt;
END;
$$;

-- _end_block materialises a streaming block's content and appends blockEnd.
CREATE OR REPLACE FUNCTION convo._end_block(p_block convo.blocks, p_metadata jsonb, p_validate boolean) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_content text := convo._block_text(p_block.id);
    v_metadata jsonb := p_block.metadata || coalesce(p_metadata, '{}');
BEGIN
    IF p_validate AND p_block.block_type = 'structured' THEN
        BEGIN
            PERFORM convo._json_check(v_content::jsonb, 'end_block: content');
        EXCEPTION WHEN invalid_text_representation OR untranslatable_character OR numeric_value_out_of_range THEN
            RAISE EXCEPTION 'end_block: structured block % does not hold valid JSON: %', p_block.id, SQLERRM
                USING ERRCODE = 'CV003';
        END;
    END IF;
    UPDATE convo.blocks
       SET status = 'completed', content = v_content, metadata = v_metadata, ended_at = now()
     WHERE id = p_block.id;
    PERFORM convo._append_event(p_block.conversation_id, 'blockEnd',
        jsonb_build_object('promptId', p_block.prompt_id, 'messageId', p_block.message_id,
                           'blockId', p_block.id, 'metadata', v_metadata),
        p_block.prompt_id, p_block.id);
END;
$$;

-- _end_tool_call materialises a tool call's output (plus a final chunk) and
-- appends toolCallCompleted or toolCallFailed. A request for input still
-- pending on the call is cancelled first (inputAnswered, status
-- cancelled): nobody can answer a call that ended.
CREATE OR REPLACE FUNCTION convo._end_tool_call(p_tool_call_id uuid, p_output text, p_error text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_call    convo.tool_calls;
    v_request convo.input_requests;
BEGIN
    UPDATE convo.input_requests r
       SET status = 'cancelled', answered_at = now()
     WHERE r.tool_call_id = p_tool_call_id AND r.status = 'pending'
    RETURNING * INTO v_request;
    IF FOUND THEN
        PERFORM convo._input_answered(v_request);
    END IF;
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

-- _fail_open_calls fails every open (started or running) tool call of the
-- prompt with p_error, as _end_tool_call fails one, whatever their number
-- in a few statements: the requests for input still pending on them are
-- cancelled, each call's output is what its toolCallProgress events hold
-- (read in one pass over the prompt's events from the first call's
-- block), and the events, call by call in the order the calls started
-- (inputAnswered, status cancelled, when a request was pending; then
-- toolCallFailed), are appended as one batch. The caller holds the
-- conversation's lock. (A loop of _end_tool_call read the prompt's later
-- events once per call and updated the conversation's row once per
-- event: cancelling a reply waiting on 1,000 inputs took seconds.)
CREATE OR REPLACE FUNCTION convo._fail_open_calls(p_prompt_id uuid, p_error text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_ids          uuid[];
    v_from         bigint;
    v_conversation uuid;
    v_message      jsonb;
    v_last         bigint;
BEGIN
    SELECT array_agg(t.id), min(coalesce(b.start_seq, 0)) INTO v_ids, v_from
      FROM convo.tool_calls t JOIN convo.blocks b ON b.id = t.block_id
     WHERE t.prompt_id = p_prompt_id AND t.status IN ('started', 'running');
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    -- The prompt's message as an input event carries it (_input_event):
    -- the same for every call, so built once.
    SELECT p.conversation_id, convo._message_json(m) INTO v_conversation, v_message
      FROM convo.prompts p JOIN convo.messages m ON m.id = p.message_id
     WHERE p.id = p_prompt_id;
    WITH cancelled AS (
        UPDATE convo.input_requests r
           SET status = 'cancelled', answered_at = now()
         WHERE r.tool_call_id = ANY (v_ids) AND r.status = 'pending'
        RETURNING r.*
    ), progress AS (
        SELECT e.tool_call_id, string_agg(e.payload->>'output', '' ORDER BY e.seq) AS output
          FROM convo.events e
         WHERE e.prompt_id = p_prompt_id AND e.seq > v_from
           AND e.kind = 'toolCallProgress' AND e.tool_call_id = ANY (v_ids)
         GROUP BY e.tool_call_id
    ), failed AS (
        UPDATE convo.tool_calls t
           SET status = 'failed', output = coalesce(o.output, ''), error = p_error, ended_at = now()
          FROM unnest(v_ids) AS i(id)
          LEFT JOIN progress o ON o.tool_call_id = i.id
         WHERE t.id = i.id
        RETURNING t
    ), batch AS (
        SELECT (f.t).started_at, (f.t).id, 0 AS nth, 'inputAnswered' AS kind, (f.t).block_id,
               -- _input_answered's payload; a cancelled request has no
               -- answer, and none of these is null.
               jsonb_build_object(
                   'toolCallId', c.tool_call_id,
                   'promptId', c.prompt_id,
                   'status', c.status,
                   'answeredAt', convo._ts(c.answered_at),
                   'message', v_message) AS payload
          FROM failed f JOIN cancelled c ON c.tool_call_id = (f.t).id
        UNION ALL
        SELECT (f.t).started_at, (f.t).id, 1, 'toolCallFailed', (f.t).block_id,
               jsonb_build_object('toolCall', convo._tool_call_json(f.t), 'error', p_error)
          FROM failed f
    )
    SELECT convo._append_events(v_conversation,
        array_agg(x.kind ORDER BY x.started_at, x.id, x.nth),
        array_agg(x.payload ORDER BY x.started_at, x.id, x.nth),
        array_agg(p_prompt_id ORDER BY x.started_at, x.id, x.nth),
        array_agg(x.block_id ORDER BY x.started_at, x.id, x.nth),
        array_agg(x.id ORDER BY x.started_at, x.id, x.nth))
      INTO v_last
      FROM batch x;
END;
$$;

-- _finish_prompt ends a queued (waiting or not) or running prompt: it
-- fails its open tool calls (cancelling their pending input requests,
-- _fail_open_calls), ends its open blocks, sets the prompt and its
-- message to the final status, and moves the conversation's active prompt
-- on. p_usage, the token usage the worker reported (_usage_json), goes in
-- the final event's payload as "usage" (none when NULL). The caller holds
-- the conversation lock.
CREATE OR REPLACE FUNCTION convo._finish_prompt(p_prompt_id uuid, p_status text, p_error text,
                                                p_usage jsonb DEFAULT NULL) RETURNS convo.prompts
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt  convo.prompts;
    v_message convo.messages;
    v_block   convo.blocks;
    v_kind    text;
BEGIN
    PERFORM convo._fail_open_calls(p_prompt_id, 'prompt ' || p_status || ' before the tool call finished');
    FOR v_block IN
        SELECT * FROM convo.blocks b
         WHERE b.prompt_id = p_prompt_id AND b.status = 'streaming'
         ORDER BY b.position
    LOOP
        PERFORM convo._end_block(v_block, NULL, false);
    END LOOP;

    UPDATE convo.prompts
       SET status = p_status, error = p_error, ended_at = now(), lease_expires_at = NULL, waiting = false
     WHERE id = p_prompt_id
    RETURNING * INTO v_prompt;
    v_kind := CASE p_status WHEN 'completed' THEN 'promptCompleted'
                            WHEN 'failed' THEN 'promptFailed'
                            ELSE 'promptCancelled' END;
    PERFORM convo._append_event(v_prompt.conversation_id, v_kind,
        convo._object(jsonb_build_object('prompt', convo._prompt_json(v_prompt), 'error', p_error, 'usage', p_usage)),
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

-- expire_leases fails every running prompt whose lease expired: its worker
-- stopped heartbeating, and since part of its reply may already have been
-- streamed to readers, running it again would show that text twice. A
-- claimed prompt whose lease expired before it was started is handed back
-- to the queue instead (its worker cleared, as release_prompt does), so
-- that the next claim takes it. A pending input request past its
-- expires_at expires: for the model it reads as a denial (answer
-- {"approved": false, "reason": "the request expired"} for an approval,
-- {"error": "the request expired"} for a client tool or a question;
-- event inputAnswered, status expired), and a prompt that waited for it
-- and for nothing else is queued again, as an answer would queue it.
-- Returns how many prompts it failed. claim_prompt calls it, and so does
-- the server periodically.
--
-- First, each process lease (convo.workers) that ran out is let go: the
-- prompts its worker holds under it (lease_expires_at 'infinity') take
-- the lease's end as their own lease, so that the passes below fail the
-- running ones and hand back the claimed ones as for any lease that ran
-- out, and the row is marked expired. A worker whose row or one of whose
-- prompts another transaction holds locked waits for a later call.
-- At most 100 leases per call; the prompts they held are failed 100 per
-- call, as the passes below go. A prompt whose conversation (or, to be handed
-- back, whose row) another transaction holds locked (a worker's batch, an
-- answer) waits for a later call, so that expire_leases never waits for a
-- lock while holding others.
CREATE OR REPLACE FUNCTION convo.expire_leases() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_candidate convo.prompts;
    v_request   convo.input_requests;
    v_kind      text;
    v_id        uuid;
    v_conv      uuid;
    v_id_text   text;
    v_count     integer := 0;
    v_worker    convo.workers;
BEGIN
    FOR v_id_text IN
        SELECT w.name FROM convo.workers w
         WHERE NOT w.expired AND w.expires_at < now()
         ORDER BY w.expires_at
         LIMIT 100
    LOOP
        -- FOR UPDATE: a claim that gives prompts this lease (_worker_lease,
        -- FOR KEY SHARE) and a heartbeat extending it hold the row; both
        -- are skipped here (the lease was extended, or the claim's
        -- prompts are let go in a later call).
        SELECT * INTO v_worker FROM convo.workers w
         WHERE w.name = v_id_text AND NOT w.expired AND w.expires_at < now()
           FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        IF convo._let_go_prompts(v_worker.name, v_worker.expires_at, true) THEN
            UPDATE convo.workers w SET expired = true WHERE w.name = v_worker.name;
        END IF;
    END LOOP;
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
    -- Claims never started, handed back, and expired input requests, whose
    -- prompts may become claimable: both make an owner wait in
    -- convo.owner_queue (trigger _prompt_claimable, which waits for the
    -- owner's row), so they are taken in the order of their owners, and
    -- two calls at once take the owners' rows in one order.
    FOR v_kind, v_id, v_conv IN
        SELECT c.kind, c.id, c.conversation_id
          FROM ((SELECT 'claim' AS kind, p.id, p.conversation_id, p.owner_id, p.lease_expires_at AS due
                   FROM convo.prompts p
                  WHERE p.status = 'queued' AND p.worker IS NOT NULL AND p.lease_expires_at < now()
                  ORDER BY p.lease_expires_at
                  LIMIT 100)
                UNION ALL
                (SELECT 'input', r.tool_call_id, r.conversation_id, p.owner_id, r.expires_at
                   FROM convo.input_requests r
                   JOIN convo.prompts p ON p.id = r.prompt_id
                  WHERE r.status = 'pending' AND r.expires_at < now()
                  ORDER BY r.expires_at
                  LIMIT 100)) c
         ORDER BY c.owner_id, c.due
    LOOP
        IF v_kind = 'claim' THEN
            UPDATE convo.prompts p
               SET worker = NULL, lease_seconds = NULL, lease_expires_at = NULL
             WHERE p.id = (SELECT q.id FROM convo.prompts q
                            WHERE q.id = v_id AND q.status = 'queued'
                              AND q.worker IS NOT NULL AND q.lease_expires_at < now()
                              FOR NO KEY UPDATE SKIP LOCKED);
            CONTINUE;
        END IF;
        PERFORM 1 FROM convo.conversations c WHERE c.id = v_conv FOR NO KEY UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        -- Recheck under the lock: it may have been answered meanwhile.
        UPDATE convo.input_requests r
           SET status = 'expired', answered_at = now(),
               answer = CASE r.kind WHEN 'approval' THEN '{"approved": false, "reason": "the request expired"}'::jsonb
                                    ELSE '{"error": "the request expired"}'::jsonb END
         WHERE r.tool_call_id = v_id AND r.status = 'pending' AND r.expires_at < now()
        RETURNING * INTO v_request;
        IF FOUND THEN
            PERFORM convo._input_answered(v_request);
            PERFORM convo._resume_prompt(v_request.prompt_id);
        END IF;
    END LOOP;
    RETURN v_count;
END;
$$;

-- _check_claim raises CV003 unless worker is a name and lease_seconds is
-- 1 to 3600: the arguments of claim_prompt and claim_prompts.
CREATE OR REPLACE FUNCTION convo._check_claim(p_action text, p_worker text, p_lease_seconds integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_worker IS NULL OR p_worker = '' THEN
        RAISE EXCEPTION '%: worker must be a non-empty name', p_action USING ERRCODE = 'CV003';
    END IF;
    IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 3600 THEN
        RAISE EXCEPTION '%: lease_seconds must be between 1 and 3600, got %', p_action, p_lease_seconds
            USING ERRCODE = 'CV003';
    END IF;
END;
$$;

-- _claim_next claims for worker, for lease_seconds, the next prompt in the
-- fair order and returns its id (or nothing when there is none). A
-- claimable prompt is queued, held by no worker and not waiting for
-- input (prompts.waiting: see wait_prompt). The
-- order: the waiting owner who holds the fewest prompts (running, or
-- claimed and not started) comes first; ties go to the owner served least
-- recently (an owner never served first, then the one whose oldest waiting
-- prompt is oldest); the owner's oldest claimable prompt is taken. With
-- p_idle_only it claims only for an owner who holds nothing. When the
-- owner it serves holds prompts and nobody else waits (one user's
-- backlog), it claims up to p_max of the owner's prompts at once, oldest
-- first: the order of as many calls. Owners and prompts that other claims
-- hold locked are skipped: it never waits for a lock.
--
-- Its cost does not grow with the length of the queue: the owners who
-- hold nothing are walked in the order of their turns along
-- owner_queue_turn_idx and the first is taken; only when every waiting
-- owner holds prompts does it count what each holds (at most as many
-- owners, and prompts, as are running).
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
    -- the claims' lease: 'infinity' under a live process lease
    v_lease   timestamptz := convo._worker_lease(p_worker, p_lease_seconds);
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
                 WHERE p.owner_id = v_owner AND p.status = 'queued' AND p.worker IS NULL AND NOT p.waiting
                   AND p.created_at >= v_since
                 ORDER BY p.created_at, p.id
                 LIMIT CASE WHEN v_alone THEN greatest(p_max, 1) ELSE 1 END
                   FOR NO KEY UPDATE SKIP LOCKED) c;
        UPDATE convo.prompts p
           SET worker = p_worker,
               lease_seconds = p_lease_seconds,
               lease_expires_at = v_lease,
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
                                   AND NOT p.waiting AND p.created_at >= v_since)
         WHERE q.owner_id = v_owner;
        IF v_ids <> '{}' THEN
            RETURN v_ids;
        END IF;
    END LOOP;
END;
$$;

-- _worker_lease is the lease of the prompts worker claims now:
-- 'infinity' while worker holds a live process lease (worker_heartbeat),
-- whose row it then locks FOR KEY SHARE until the transaction ends, so
-- that expire_leases cannot let the lease go before these claims are
-- visible (a heartbeat extending the lease is not held up); otherwise
-- lease_seconds from now. A row being let go (locked FOR UPDATE) is
-- skipped, not waited for: that lease is running out.
CREATE OR REPLACE FUNCTION convo._worker_lease(p_worker text, p_lease_seconds integer) RETURNS timestamptz
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM convo.workers w
     WHERE w.name = p_worker AND NOT w.expired AND w.expires_at >= now()
       FOR KEY SHARE SKIP LOCKED;
    IF FOUND THEN
        RETURN 'infinity';
    END IF;
    RETURN now() + make_interval(secs => p_lease_seconds);
END;
$$;

-- _let_go_prompts gives every prompt worker holds under its process lease
-- (lease_expires_at 'infinity') the lease p_until: the end of a process
-- lease that ran out, or now, for a process that starts under the name of
-- one that died. The caller holds the worker's row FOR UPDATE. With
-- p_skip_locked, prompts other transactions hold locked are left for a
-- later call; it returns whether none is left.
CREATE OR REPLACE FUNCTION convo._let_go_prompts(p_worker text, p_until timestamptz, p_skip_locked boolean)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT p_skip_locked THEN
        UPDATE convo.prompts p SET lease_expires_at = p_until
         WHERE p.worker = p_worker AND p.lease_expires_at = 'infinity';
        RETURN true;
    END IF;
    UPDATE convo.prompts p SET lease_expires_at = p_until
     WHERE p.id IN (SELECT q.id FROM convo.prompts q
                     WHERE q.worker = p_worker AND q.lease_expires_at = 'infinity'
                       FOR NO KEY UPDATE SKIP LOCKED);
    RETURN NOT EXISTS (SELECT 1 FROM convo.prompts q
                        WHERE q.worker = p_worker AND q.lease_expires_at = 'infinity');
END;
$$;

-- worker_heartbeat takes or extends worker's process lease for
-- lease_seconds (1 to 3600) from now: one call per worker process keeps
-- every prompt it claims alive, however many it runs (docs/worker-api.md,
-- "Two leases"). A prompt claimed while the lease is live is held under it
-- (lease_expires_at 'infinity') until it ends, is released, or the lease
-- runs out: then expire_leases fails the running ones ("lease expired:
-- worker … stopped heartbeating") and hands the claimed ones back to the
-- queue. The lease is live until its end; no per-prompt heartbeat is
-- needed for those prompts.
--
-- It returns true when it extended a live lease or took a lease for a
-- name that held none. It returns false when worker's lease had run out
-- (let go by expire_leases or not yet): every prompt the worker held
-- under it is lost (failed or handed back, by this call's lead), and the
-- worker must stop writing them; a new lease starts all the same, for the
-- prompts it claims from now on. With starting (a process's first call),
-- whatever the name held before (a previous process of the same name
-- that died, its lease perhaps still running) is let go at once, and it
-- returns true. Bad arguments raise CV003, naming the argument.
CREATE OR REPLACE FUNCTION convo.worker_heartbeat(worker text, lease_seconds integer, starting boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_worker convo.workers;
    v_until  timestamptz;
BEGIN
    IF worker IS NULL OR worker = '' THEN
        RAISE EXCEPTION 'worker_heartbeat: worker must be a non-empty name' USING ERRCODE = 'CV003';
    END IF;
    IF lease_seconds IS NULL OR lease_seconds < 1 OR lease_seconds > 3600 THEN
        RAISE EXCEPTION 'worker_heartbeat: lease_seconds must be between 1 and 3600, got %',
            coalesce(lease_seconds::text, 'NULL') USING ERRCODE = 'CV003';
    END IF;
    IF starting IS NULL THEN
        RAISE EXCEPTION 'worker_heartbeat: starting must be true or false, got NULL' USING ERRCODE = 'CV003';
    END IF;
    v_until := now() + make_interval(secs => worker_heartbeat.lease_seconds);
    -- The common case: a live lease, extended. FOR NO KEY UPDATE does not
    -- wait for the claims under it (FOR KEY SHARE).
    SELECT * INTO v_worker FROM convo.workers w WHERE w.name = worker_heartbeat.worker FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        INSERT INTO convo.workers AS w (name, lease_seconds, expires_at)
        VALUES (worker_heartbeat.worker, worker_heartbeat.lease_seconds, v_until)
            ON CONFLICT (name) DO NOTHING;
        IF FOUND THEN
            -- A new name: forget the leases that ran out a day ago (a
            -- process that died long ago; its prompts were let go).
            DELETE FROM convo.workers w WHERE w.expired AND w.expires_at < now() - interval '1 day';
            RETURN true;
        END IF;
        -- Another call of the same name inserted it meanwhile.
        SELECT * INTO v_worker FROM convo.workers w WHERE w.name = worker_heartbeat.worker FOR NO KEY UPDATE;
    END IF;
    IF NOT v_worker.expired AND v_worker.expires_at >= now() AND NOT starting THEN
        UPDATE convo.workers w
           SET lease_seconds = worker_heartbeat.lease_seconds, beat_at = now(), expires_at = v_until
         WHERE w.name = worker_heartbeat.worker;
        RETURN true;
    END IF;
    -- A lease that ran out, or a new process under the name: its prompts
    -- are let go before a new lease starts, or the new lease would keep
    -- them alive. FOR UPDATE waits for the claims under the old lease.
    SELECT * INTO v_worker FROM convo.workers w WHERE w.name = worker_heartbeat.worker FOR UPDATE;
    PERFORM convo._let_go_prompts(worker_heartbeat.worker, least(v_worker.expires_at, now()), false);
    UPDATE convo.workers w
       SET lease_seconds = worker_heartbeat.lease_seconds, started_at = now(), beat_at = now(),
           expires_at = v_until, expired = false
     WHERE w.name = worker_heartbeat.worker;
    RETURN starting OR (NOT v_worker.expired AND v_worker.expires_at >= now());
END;
$$;

-- claim_prompt hands a claimable prompt (queued, held by no worker, not
-- waiting for input) to
-- worker for lease_seconds, in the fair order of _claim_next: the oldest
-- prompt of the waiting owner who holds the fewest prompts, ties to the
-- owner served least recently. It returns no row when nothing is
-- claimable. It never waits for a lock: prompts and owners other claims
-- hold locked are skipped.
CREATE OR REPLACE FUNCTION convo.claim_prompt(worker text, lease_seconds integer)
RETURNS TABLE (prompt_id uuid, conversation_id uuid, message_id uuid, model_config jsonb, attempts integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_ids uuid[];
BEGIN
    PERFORM convo._check_claim('claim_prompt', worker, lease_seconds);
    PERFORM convo.expire_leases();
    v_ids := convo._claim_next(worker, lease_seconds, false);
    RETURN QUERY
    SELECT p.id, p.conversation_id, p.message_id, p.model_config, p.attempts
      FROM convo.prompts p
     WHERE p.id = ANY (v_ids);
END;
$$;

-- heartbeat extends worker's lease on a prompt it holds. It returns false
-- when the worker should stop: the prompt was cancelled, failed (for example
-- by lease expiry), completed, or is now held by another worker. A prompt
-- held under its worker's process lease (lease_expires_at 'infinity',
-- see worker_heartbeat) keeps it: the call changes nothing and answers
-- whether the prompt is still the worker's. Once that process lease ran
-- out and expire_leases let the prompt go, the prompt's lease is its own
-- again, and heartbeat extends it as for any other.
CREATE OR REPLACE FUNCTION convo.heartbeat(prompt_id uuid, worker text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE convo.prompts p
       SET lease_expires_at = CASE WHEN p.lease_expires_at = 'infinity' THEN p.lease_expires_at
                                   ELSE now() + make_interval(secs => coalesce(p.lease_seconds, 30)) END
     WHERE p.id = heartbeat.prompt_id
       AND p.worker = heartbeat.worker
       AND p.status IN ('queued', 'running');
    IF FOUND THEN
        RETURN true;
    END IF;
    PERFORM 1 FROM convo.prompts p WHERE p.id = heartbeat.prompt_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'heartbeat: prompt % does not exist', heartbeat.prompt_id USING ERRCODE = 'CV001';
    END IF;
    RETURN false;
END;
$$;

-- start_prompt moves a claimed queued prompt to running and its message to
-- processing; a prompt resumed after a pause (wait_prompt) keeps the
-- started_at of its first start. A prompt waiting for input cannot start
-- (CV002): it is claimed once answered. Events: promptStarted,
-- messageUpdated. A prompt claimed under its worker's process lease stays
-- under it (lease_expires_at 'infinity'); any other is leased for the
-- claim's lease_seconds from now.
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
       SET status = 'running', started_at = coalesce(p.started_at, now()),
           lease_expires_at = CASE WHEN p.lease_expires_at = 'infinity' THEN p.lease_expires_at
                                   ELSE now() + make_interval(secs => coalesce(p.lease_seconds, 30)) END
     WHERE p.id = start_prompt.prompt_id AND p.status = 'queued' AND NOT p.waiting
    RETURNING * INTO v_prompt;
    IF NOT FOUND THEN
        SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = start_prompt.prompt_id;
        IF v_prompt.waiting THEN
            RAISE EXCEPTION 'start_prompt: prompt % is waiting for input, not claimed', v_prompt.id
                USING ERRCODE = 'CV002', HINT = 'an answer (or the requests'' expiry) queues it again; claim it then';
        END IF;
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

-- release_prompt hands a prompt that worker claimed but never started back
-- to the queue at once, instead of when its lease expires: a worker that
-- is shutting down calls it for the prompts it holds. It returns false,
-- changing nothing, when the prompt is not a queued prompt held by worker
-- (a running prompt cannot be handed over: readers have seen its partial
-- reply; a worker fails it instead). Notifies "convo_prompts" with
-- 'queued:<prompt id>', so an idle worker takes it.
CREATE OR REPLACE FUNCTION convo.release_prompt(prompt_id uuid, worker text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE convo.prompts p
       SET worker = NULL, lease_seconds = NULL, lease_expires_at = NULL
     WHERE p.id = release_prompt.prompt_id
       AND p.worker = release_prompt.worker
       AND p.status = 'queued';
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM convo._notify_prompt('queued', release_prompt.prompt_id);
    RETURN true;
END;
$$;

-- _start_block is start_block with the block's id chosen by the caller
-- (write_batch takes it from the worker, which needs no answer to go on).
-- It records start_seq: the conversation is locked (by _running_prompt),
-- so blockStart takes its last_seq + 1.
CREATE OR REPLACE FUNCTION convo._start_block(p_prompt_id uuid, p_block_id uuid, p_block_type text, p_metadata jsonb)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt convo.prompts;
    v_block  convo.blocks;
BEGIN
    IF p_block_type IS NULL OR p_block_type !~ '^[a-z][a-z0-9_]{0,63}$' THEN
        RAISE EXCEPTION 'start_block: block_type % is not a lower_snake name of at most 64 characters', p_block_type
            USING ERRCODE = 'CV003';
    END IF;
    IF p_block_type = 'file' THEN
        RAISE EXCEPTION 'start_block: block_type file is reserved for the files a user attaches (docs/files.md); name a worker''s own output otherwise'
            USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._check_metadata(p_metadata);
    PERFORM convo._json_check(p_metadata, 'start_block: metadata');
    v_prompt := convo._running_prompt(p_prompt_id, 'start_block');
    INSERT INTO convo.blocks (id, conversation_id, message_id, prompt_id, position, block_type, status, metadata, start_seq)
    VALUES (p_block_id, v_prompt.conversation_id, v_prompt.message_id, v_prompt.id,
            (SELECT coalesce(max(b.position) + 1, 0) FROM convo.blocks b WHERE b.message_id = v_prompt.message_id),
            p_block_type, 'streaming', coalesce(p_metadata, '{}'),
            (SELECT c.last_seq + 1 FROM convo.conversations c WHERE c.id = v_prompt.conversation_id))
    RETURNING * INTO v_block;
    PERFORM convo._append_event(v_prompt.conversation_id, 'blockStart',
        jsonb_build_object('promptId', v_prompt.id, 'messageId', v_prompt.message_id,
                           'blockId', v_block.id, 'blockType', v_block.block_type,
                           'metadata', v_block.metadata, 'position', v_block.position),
        v_prompt.id, v_block.id);
    RETURN v_block.id;
END;
$$;

-- start_block opens a streaming block of a running prompt and returns its
-- id. Event: blockStart.
CREATE OR REPLACE FUNCTION convo.start_block(prompt_id uuid, block_type text, metadata jsonb DEFAULT '{}')
RETURNS uuid
LANGUAGE sql AS $$
    SELECT convo._start_block(start_block.prompt_id, gen_random_uuid(), start_block.block_type, start_block.metadata)
$$;

-- _streaming_block locks the block's conversation and returns the block,
-- raising unless it exists, is streaming and its prompt is running.
CREATE OR REPLACE FUNCTION convo._streaming_block(p_block_id uuid, p_action text) RETURNS convo.blocks
LANGUAGE plpgsql AS $$
DECLARE
    v_block convo.blocks;
BEGIN
    SELECT * INTO v_block FROM convo.blocks WHERE id = p_block_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: block % does not exist', p_action, p_block_id USING ERRCODE = 'CV001';
    END IF;
    IF v_block.prompt_id IS NULL THEN
        RAISE EXCEPTION '%: block % belongs to a user message and cannot be written', p_action, p_block_id
            USING ERRCODE = 'CV002';
    END IF;
    PERFORM convo._running_prompt(v_block.prompt_id, p_action);
    SELECT * INTO v_block FROM convo.blocks WHERE id = p_block_id;
    IF v_block.status <> 'streaming' THEN
        RAISE EXCEPTION '%: block % has ended', p_action, p_block_id USING ERRCODE = 'CV002';
    END IF;
    RETURN v_block;
END;
$$;

CREATE OR REPLACE FUNCTION convo.append_block(block_id uuid, delta text, delta_seq integer DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_conversation_id uuid;
    v_prompt_id       uuid;
    v_message_id      uuid;
    v_seq             bigint;
    v_cached_block_id uuid;
    v_cached_count    integer;
    v_block_status    text;
    v_prompt_status   text;
    v_count           integer;
BEGIN
    -- Appends are numbered from 1: a delta_seq below would pass for a
    -- retry of an append applied already, doing nothing.
    IF append_block.delta_seq < 1 THEN
        RAISE EXCEPTION 'append_block: delta_seq must be 1 or more (the number of this append to its block: 1, 2, 3, …), got %',
            append_block.delta_seq USING ERRCODE = 'CV003';
    END IF;
    -- The block's immutable columns need no lock.
    SELECT b.conversation_id, b.prompt_id, b.message_id
      INTO v_conversation_id, v_prompt_id, v_message_id
      FROM convo.blocks b
     WHERE b.id = append_block.block_id;

    -- The common path: the conversation's latest delta went to this block,
    -- so it is still streaming and its prompt running (the triggers above
    -- clear delta_block_id otherwise), and delta_count is its count. The
    -- update takes the conversation's lock and re-evaluates its condition
    -- on the row as the previous holder committed it.
    IF delta <> '' THEN
        UPDATE convo.conversations c
           SET last_seq = c.last_seq + 1, delta_count = c.delta_count + 1
         WHERE c.id = v_conversation_id
           AND c.delta_block_id = append_block.block_id
           AND (append_block.delta_seq IS NULL OR append_block.delta_seq = c.delta_count + 1)
        RETURNING c.last_seq INTO v_seq;
    END IF;

    IF v_seq IS NULL THEN
        -- The full path: everything is checked under the lock.
        IF v_conversation_id IS NULL THEN
            RAISE EXCEPTION 'append_block: block % does not exist', append_block.block_id USING ERRCODE = 'CV001';
        END IF;
        IF v_prompt_id IS NULL THEN
            RAISE EXCEPTION 'append_block: block % belongs to a user message and cannot be written', append_block.block_id
                USING ERRCODE = 'CV002';
        END IF;
        SELECT c.delta_block_id, c.delta_count INTO v_cached_block_id, v_cached_count
          FROM convo.conversations c
         WHERE c.id = v_conversation_id
           FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'conversation % does not exist', v_conversation_id USING ERRCODE = 'CV001';
        END IF;
        SELECT b.status, b.delta_count, p.status INTO v_block_status, v_count, v_prompt_status
          FROM convo.blocks b
          JOIN convo.prompts p ON p.id = b.prompt_id
         WHERE b.id = append_block.block_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'append_block: block % does not exist', append_block.block_id USING ERRCODE = 'CV001';
        END IF;
        IF v_prompt_status = 'queued' THEN
            RAISE EXCEPTION 'append_block: prompt % is queued, not running', v_prompt_id
                USING ERRCODE = 'CV002', HINT = 'call convo.start_prompt first';
        ELSIF v_prompt_status <> 'running' THEN
            RAISE EXCEPTION 'append_block: prompt % is %, not running', v_prompt_id, v_prompt_status
                USING ERRCODE = 'CV002';
        END IF;
        IF v_block_status <> 'streaming' THEN
            RAISE EXCEPTION 'append_block: block % has ended', append_block.block_id USING ERRCODE = 'CV002';
        END IF;
        IF v_cached_block_id = append_block.block_id THEN
            v_count := v_cached_count;
        END IF;
        IF delta_seq IS NOT NULL THEN
            IF delta_seq <= v_count THEN
                RETURN; -- a retry of an append that was applied
            END IF;
            IF delta_seq <> v_count + 1 THEN
                RAISE EXCEPTION 'append_block: delta_seq % skips ahead: block % has % deltas, the next is %',
                    delta_seq, append_block.block_id, v_count, v_count + 1
                    USING ERRCODE = 'CV002';
            END IF;
        END IF;
        -- This block becomes the conversation's delta_block_id; the block that
        -- had it keeps its count in its own row.
        IF v_cached_block_id IS DISTINCT FROM append_block.block_id AND v_cached_block_id IS NOT NULL THEN
            UPDATE convo.blocks b SET delta_count = v_cached_count WHERE b.id = v_cached_block_id;
        END IF;
        UPDATE convo.conversations c
           SET delta_block_id = append_block.block_id,
               delta_count = v_count + 1,
               last_seq = c.last_seq + CASE WHEN delta <> '' THEN 1 ELSE 0 END
         WHERE c.id = v_conversation_id
        RETURNING c.last_seq INTO v_seq;
        IF delta IS NULL OR delta = '' THEN
            RETURN; -- counted, but no event
        END IF;
    END IF;

    INSERT INTO convo.events (conversation_id, seq, kind, prompt_id, block_id, payload)
    VALUES (v_conversation_id, v_seq, 'blockDelta', v_prompt_id, append_block.block_id,
            jsonb_build_object('promptId', v_prompt_id, 'messageId', v_message_id,
                               'blockId', append_block.block_id, 'content', delta));
    IF current_setting('convo.notify_events', true) IS DISTINCT FROM 'off' THEN
        PERFORM convo._notify_event(v_conversation_id, v_seq);
    END IF;
END;
$$;

-- end_block ends a streaming block, merging metadata (a JSON object) into
-- the block's. A structured block must then hold valid JSON that keeps
-- convo's rule for JSON values (_json_check; CV003 otherwise). Event:
-- blockEnd.
CREATE OR REPLACE FUNCTION convo.end_block(block_id uuid, metadata jsonb DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM convo._check_metadata(metadata);
    PERFORM convo._json_check(metadata, 'end_block: metadata');
    PERFORM convo._end_block(convo._streaming_block(end_block.block_id, 'end_block'), end_block.metadata, true);
END;
$$;

-- _start_tool_call is start_tool_call with the call's id chosen by the
-- caller (write_batch).
CREATE OR REPLACE FUNCTION convo._start_tool_call(p_block_id uuid, p_tool_call_id uuid, p_name text, p_input jsonb)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_block convo.blocks;
    v_call  convo.tool_calls;
BEGIN
    IF p_name IS NULL OR p_name = '' THEN
        RAISE EXCEPTION 'start_tool_call: name must not be empty' USING ERRCODE = 'CV003';
    END IF;
    IF p_input IS NULL THEN
        RAISE EXCEPTION 'start_tool_call: input must be JSON, not NULL' USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._json_check(p_input, 'start_tool_call: input');
    SELECT * INTO v_block FROM convo.blocks b WHERE b.id = p_block_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'start_tool_call: block % does not exist', p_block_id USING ERRCODE = 'CV001';
    END IF;
    IF v_block.prompt_id IS NULL THEN
        RAISE EXCEPTION 'start_tool_call: block % belongs to a user message', v_block.id USING ERRCODE = 'CV002';
    END IF;
    PERFORM convo._running_prompt(v_block.prompt_id, 'start_tool_call');
    IF v_block.block_type <> 'tool_use' THEN
        RAISE EXCEPTION 'start_tool_call: block % is a % block, not tool_use', v_block.id, v_block.block_type
            USING ERRCODE = 'CV002';
    END IF;
    IF EXISTS (SELECT 1 FROM convo.tool_calls t WHERE t.block_id = v_block.id) THEN
        RAISE EXCEPTION 'start_tool_call: block % already has a tool call', v_block.id USING ERRCODE = 'CV002';
    END IF;
    INSERT INTO convo.tool_calls (id, conversation_id, block_id, prompt_id, name, input, status)
    VALUES (p_tool_call_id, v_block.conversation_id, v_block.id, v_block.prompt_id, p_name, p_input, 'started')
    RETURNING * INTO v_call;
    PERFORM convo._append_event(v_block.conversation_id, 'toolCallStarted',
        jsonb_build_object('toolCall', convo._tool_call_json(v_call), 'input', v_call.input),
        v_call.prompt_id, v_call.block_id, v_call.id);
    RETURN v_call.id;
END;
$$;

-- start_tool_call records a call of the tool name with input on a tool_use
-- block (streaming or ended) of a running prompt, and returns its id. One
-- block holds at most one tool call. Event: toolCallStarted.
CREATE OR REPLACE FUNCTION convo.start_tool_call(block_id uuid, name text, input jsonb) RETURNS uuid
LANGUAGE sql AS $$
    SELECT convo._start_tool_call(start_tool_call.block_id, gen_random_uuid(), start_tool_call.name, start_tool_call.input)
$$;

-- _open_tool_call locks the call's conversation and returns the call,
-- raising unless it exists, is started or running, and its prompt runs.
CREATE OR REPLACE FUNCTION convo._open_tool_call(p_tool_call_id uuid, p_action text) RETURNS convo.tool_calls
LANGUAGE plpgsql AS $$
DECLARE
    v_call convo.tool_calls;
BEGIN
    SELECT * INTO v_call FROM convo.tool_calls WHERE id = p_tool_call_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: tool call % does not exist', p_action, p_tool_call_id USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._running_prompt(v_call.prompt_id, p_action);
    SELECT * INTO v_call FROM convo.tool_calls WHERE id = p_tool_call_id;
    IF v_call.status NOT IN ('started', 'running') THEN
        RAISE EXCEPTION '%: tool call % has already %', p_action, p_tool_call_id, v_call.status
            USING ERRCODE = 'CV002';
    END IF;
    RETURN v_call;
END;
$$;

-- tool_call_progress appends output to a started or running tool call and
-- marks it running. Like append_block, its cost does not grow with the
-- output so far; empty output is a no-op. Event: toolCallProgress.
CREATE OR REPLACE FUNCTION convo.tool_call_progress(tool_call_id uuid, output text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_call convo.tool_calls;
BEGIN
    v_call := convo._open_tool_call(tool_call_progress.tool_call_id, 'tool_call_progress');
    IF output IS NULL OR output = '' THEN
        RETURN;
    END IF;
    IF v_call.status = 'started' THEN
        UPDATE convo.tool_calls t SET status = 'running' WHERE t.id = v_call.id;
    END IF;
    PERFORM convo._append_event(v_call.conversation_id, 'toolCallProgress',
        jsonb_build_object('toolCallId', v_call.id, 'blockId', v_call.block_id, 'output', output),
        v_call.prompt_id, v_call.block_id, v_call.id);
END;
$$;

-- complete_tool_call completes a tool call; output, when given, is appended
-- to what progress wrote. Event: toolCallCompleted, whose toolCall holds
-- the whole output.
CREATE OR REPLACE FUNCTION convo.complete_tool_call(tool_call_id uuid, output text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM convo._open_tool_call(complete_tool_call.tool_call_id, 'complete_tool_call');
    PERFORM convo._end_tool_call(complete_tool_call.tool_call_id, complete_tool_call.output, NULL);
END;
$$;

-- fail_tool_call fails a tool call with a non-empty error. Event:
-- toolCallFailed.
CREATE OR REPLACE FUNCTION convo.fail_tool_call(tool_call_id uuid, error text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF error IS NULL OR error = '' THEN
        RAISE EXCEPTION 'fail_tool_call: error must not be empty' USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._open_tool_call(fail_tool_call.tool_call_id, 'fail_tool_call');
    PERFORM convo._end_tool_call(fail_tool_call.tool_call_id, NULL, fail_tool_call.error);
END;
$$;

-- _usage_json checks the token usage a worker reports for a prompt and
-- returns it in its one shape: {"inputTokens", "outputTokens",
-- "cachedInputTokens", "reasoningTokens"}, whole numbers from 0 to
-- 2^53 - 1 (the last two 0 when not given; cached input tokens are some of
-- the input tokens, reasoning tokens some of the output tokens). NULL (SQL
-- or JSON): none reported.
-- Errors: CV003 naming what is wrong (not an object, an unknown field, a
-- missing or bad count, a part larger than its whole).
CREATE OR REPLACE FUNCTION convo._usage_json(p_usage jsonb, p_action text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_keys constant text[] := ARRAY['inputTokens', 'outputTokens', 'cachedInputTokens', 'reasoningTokens'];
    v_key  text;
    v_val  jsonb;
    v_out  jsonb := '{}';
BEGIN
    IF p_usage IS NULL OR jsonb_typeof(p_usage) = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_usage) <> 'object' THEN
        RAISE EXCEPTION '%: usage must be a JSON object {"inputTokens", "outputTokens", "cachedInputTokens", "reasoningTokens"}, got a %',
            p_action, jsonb_typeof(p_usage) USING ERRCODE = 'CV003';
    END IF;
    SELECT k INTO v_key FROM jsonb_object_keys(p_usage) k WHERE k <> ALL (v_keys) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%: usage.% is not a field of usage (inputTokens, outputTokens, cachedInputTokens, reasoningTokens)',
            p_action, left(v_key, 64) USING ERRCODE = 'CV003';
    END IF;
    FOREACH v_key IN ARRAY v_keys LOOP
        v_val := p_usage->v_key;
        IF v_val IS NULL AND v_key IN ('cachedInputTokens', 'reasoningTokens') THEN
            v_val := '0';
        END IF;
        IF v_val IS NULL OR jsonb_typeof(v_val) <> 'number' OR (v_val #>> '{}')::numeric < 0
           OR (v_val #>> '{}')::numeric <> trunc((v_val #>> '{}')::numeric)
           OR (v_val #>> '{}')::numeric > 9007199254740991 THEN
            RAISE EXCEPTION '%: usage.% must be a whole number from 0 to 2^53 - 1, got %', p_action, v_key,
                coalesce(left(v_val::text, 64), 'nothing') USING ERRCODE = 'CV003';
        END IF;
        v_out := v_out || jsonb_build_object(v_key, (v_val #>> '{}')::numeric::bigint);
    END LOOP;
    IF (v_out->>'cachedInputTokens')::bigint > (v_out->>'inputTokens')::bigint THEN
        RAISE EXCEPTION '%: usage.cachedInputTokens (%) is more than usage.inputTokens (%): cached tokens are some of the input tokens',
            p_action, v_out->>'cachedInputTokens', v_out->>'inputTokens' USING ERRCODE = 'CV003';
    END IF;
    IF (v_out->>'reasoningTokens')::bigint > (v_out->>'outputTokens')::bigint THEN
        RAISE EXCEPTION '%: usage.reasoningTokens (%) is more than usage.outputTokens (%): reasoning tokens are some of the output tokens',
            p_action, v_out->>'reasoningTokens', v_out->>'outputTokens' USING ERRCODE = 'CV003';
    END IF;
    RETURN v_out;
END;
$$;

-- complete_prompt completes a running prompt and its message. Tool calls
-- still open are failed and blocks still open are ended first. usage,
-- when given, is the tokens the reply took, as the model reported them
-- (_usage_json: {"inputTokens", "outputTokens", "cachedInputTokens",
-- "reasoningTokens"}); it is kept in the promptCompleted event, whose
-- payload is then the same on every read (OpenAI's Responses API shows
-- it as the Response's usage). Events: (toolCallFailed …, blockEnd …),
-- promptCompleted, messageUpdated, and conversationUpdated when the
-- active prompt moves on (docs/events.md).
-- Errors, changing nothing: those of _usage_json (CV003), then those of a
-- prompt that is not running.
CREATE OR REPLACE FUNCTION convo.complete_prompt(prompt_id uuid, usage jsonb DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_usage jsonb := convo._usage_json(complete_prompt.usage, 'complete_prompt');
BEGIN
    PERFORM convo._running_prompt(complete_prompt.prompt_id, 'complete_prompt');
    PERFORM convo._finish_prompt(complete_prompt.prompt_id, 'completed', NULL, v_usage);
END;
$$;

-- fail_prompt fails a queued or running prompt and its message with a
-- non-empty error; open blocks and tool calls end as in complete_prompt.
-- Events: (…), promptFailed, messageUpdated.
CREATE OR REPLACE FUNCTION convo.fail_prompt(prompt_id uuid, error text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt convo.prompts;
BEGIN
    IF error IS NULL OR error = '' THEN
        RAISE EXCEPTION 'fail_prompt: error must not be empty' USING ERRCODE = 'CV003';
    END IF;
    SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = fail_prompt.prompt_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fail_prompt: prompt % does not exist', fail_prompt.prompt_id USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._lock_conversation(v_prompt.conversation_id);
    SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = fail_prompt.prompt_id;
    IF v_prompt.status NOT IN ('queued', 'running') THEN
        RAISE EXCEPTION 'fail_prompt: prompt % is already %', v_prompt.id, v_prompt.status USING ERRCODE = 'CV002';
    END IF;
    PERFORM convo._finish_prompt(v_prompt.id, 'failed', fail_prompt.error);
END;
$$;

-- Pauses: a tool call asks a person (request_input) and its prompt waits
-- for the answer holding no worker (wait_prompt); the answer
-- (answer_input, client_api.sql) queues it again, and a worker claims and
-- starts it as usual and reads the answers (prompt_inputs).
-- docs/worker-api.md, "Pauses", is the reference.

-- _input_event appends an event of an input request (the row's prompt,
-- block and tool call ids set) whose payload also carries the prompt's
-- assistant message as _message_json makes it (key "message"), so that a
-- stream that does not deliver the kind to a client can send that
-- message as a messageUpdated of the same seq instead.
CREATE OR REPLACE FUNCTION convo._input_event(p_request convo.input_requests, p_kind text, p_payload jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_block_id uuid;
    v_message  convo.messages;
BEGIN
    SELECT t.block_id INTO v_block_id FROM convo.tool_calls t WHERE t.id = p_request.tool_call_id;
    SELECT m.* INTO v_message FROM convo.prompts p JOIN convo.messages m ON m.id = p.message_id
     WHERE p.id = p_request.prompt_id;
    PERFORM convo._append_event(p_request.conversation_id, p_kind,
        p_payload || jsonb_build_object('message', convo._message_json(v_message)),
        p_request.prompt_id, v_block_id, p_request.tool_call_id);
END;
$$;

-- _input_answered appends inputAnswered for a request that stopped being
-- pending: answered, expired or cancelled.
CREATE OR REPLACE FUNCTION convo._input_answered(p_request convo.input_requests) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM convo._input_event(p_request, 'inputAnswered', convo._object(jsonb_build_object(
        'toolCallId', p_request.tool_call_id,
        'promptId', p_request.prompt_id,
        'status', p_request.status,
        'answer', p_request.answer,
        'answeredAt', convo._ts(p_request.answered_at))));
END;
$$;

-- _resume_prompt makes a waiting prompt with no pending request left
-- claimable again (trigger prompts_claimable_resume puts its owner in
-- convo.owner_queue) and notifies "convo_prompts" with 'queued:<prompt
-- id>', as a queued prompt does. It returns whether it did. The caller
-- holds the conversation lock.
CREATE OR REPLACE FUNCTION convo._resume_prompt(p_prompt_id uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE convo.prompts p SET waiting = false
     WHERE p.id = p_prompt_id AND p.waiting
       AND NOT EXISTS (SELECT 1 FROM convo.input_requests r WHERE r.prompt_id = p.id AND r.status = 'pending');
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM convo._notify_prompt('queued', p_prompt_id);
    RETURN true;
END;
$$;

-- _check_input_request raises CV003 unless kind is approval, client_tool
-- or question and request is a JSON object of its shape: approval {} or
-- {"message": text}; client_tool {} or {"outputSchema": object};
-- question {"question": text, "choices": [text, …]} (choices optional:
-- one or more distinct texts). Every text must show something
-- (_has_visible); a key the kind does not take is refused.
CREATE OR REPLACE FUNCTION convo._check_input_request(p_kind text, p_request jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_keys    text[] := CASE p_kind WHEN 'approval' THEN ARRAY['message']
                                    WHEN 'client_tool' THEN ARRAY['outputSchema']
                                    WHEN 'question' THEN ARRAY['question', 'choices'] END;
    v_key     text;
    v_choice  jsonb;
BEGIN
    IF v_keys IS NULL THEN
        RAISE EXCEPTION 'request_input: kind must be approval, client_tool or question, got %', coalesce(p_kind, 'NULL')
            USING ERRCODE = 'CV003';
    END IF;
    IF jsonb_typeof(p_request) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'request_input: request must be a JSON object, got %', coalesce(jsonb_typeof(p_request), 'NULL')
            USING ERRCODE = 'CV003';
    END IF;
    SELECT k INTO v_key FROM jsonb_object_keys(p_request) k WHERE k <> ALL (v_keys) ORDER BY k LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'request_input: a request of kind % takes %, not "%"', p_kind,
            coalesce(nullif(array_to_string(v_keys, ', '), ''), 'no key'), v_key USING ERRCODE = 'CV003';
    END IF;
    IF p_kind = 'approval' AND p_request ? 'message'
       AND (jsonb_typeof(p_request->'message') <> 'string' OR NOT convo._has_visible(p_request->>'message')) THEN
        RAISE EXCEPTION 'request_input: request.message must be a text that shows something' USING ERRCODE = 'CV003';
    END IF;
    IF p_kind = 'client_tool' AND p_request ? 'outputSchema' AND jsonb_typeof(p_request->'outputSchema') <> 'object' THEN
        RAISE EXCEPTION 'request_input: request.outputSchema must be a JSON object (a JSON Schema), got %',
            jsonb_typeof(p_request->'outputSchema') USING ERRCODE = 'CV003';
    END IF;
    -- The bounds of a declared schema SQL can check cheaply (the Go
    -- answer path applies the whole declaration budget, internal/jsonschema
    -- Declare: MaxBytes, MaxDepth).
    IF p_kind = 'client_tool' AND p_request ? 'outputSchema' THEN
        IF octet_length((p_request->'outputSchema')::text) > 65536 THEN
            RAISE EXCEPTION 'request_input: request.outputSchema is over the schema size limit: % bytes, at most 65536',
                octet_length((p_request->'outputSchema')::text) USING ERRCODE = 'CV003';
        END IF;
        IF jsonb_path_exists(p_request->'outputSchema', 'strict $.**{32 to last} ? (@.type() == "object" || @.type() == "array")') THEN
            RAISE EXCEPTION 'request_input: request.outputSchema is over the schema depth limit: nested deeper than 32 levels'
                USING ERRCODE = 'CV003';
        END IF;
    END IF;
    IF p_kind = 'question' THEN
        IF jsonb_typeof(p_request->'question') IS DISTINCT FROM 'string' OR NOT convo._has_visible(p_request->>'question') THEN
            RAISE EXCEPTION 'request_input: request.question must be a text that shows something' USING ERRCODE = 'CV003';
        END IF;
        IF p_request ? 'choices' THEN
            IF jsonb_typeof(p_request->'choices') <> 'array' OR jsonb_array_length(p_request->'choices') = 0 THEN
                RAISE EXCEPTION 'request_input: request.choices must be a non-empty JSON array of texts' USING ERRCODE = 'CV003';
            END IF;
            FOR v_choice IN SELECT c FROM jsonb_array_elements(p_request->'choices') c LOOP
                IF jsonb_typeof(v_choice) <> 'string' OR NOT convo._has_visible(v_choice #>> '{}') THEN
                    RAISE EXCEPTION 'request_input: request.choices must be texts that show something, got %', v_choice
                        USING ERRCODE = 'CV003';
                END IF;
            END LOOP;
            IF (SELECT count(DISTINCT c) FROM jsonb_array_elements(p_request->'choices') c)
               <> jsonb_array_length(p_request->'choices') THEN
                RAISE EXCEPTION 'request_input: request.choices must be distinct' USING ERRCODE = 'CV003';
            END IF;
        END IF;
    END IF;
END;
$$;

-- _request_input is request_input (write_batch calls it too).
CREATE OR REPLACE FUNCTION convo._request_input(p_tool_call_id uuid, p_kind text, p_request jsonb,
                                                p_expires_at timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_call    convo.tool_calls;
    v_request convo.input_requests;
BEGIN
    -- The rule for every JSON value first (its depth check also keeps
    -- the schema's own bounds below from meeting a 12,000-deep value).
    PERFORM convo._json_check(p_request, 'request_input: request');
    PERFORM convo._check_input_request(p_kind, p_request);
    IF p_expires_at IS NOT NULL AND p_expires_at <= now() THEN
        RAISE EXCEPTION 'request_input: expires_at must be in the future, got %', p_expires_at USING ERRCODE = 'CV003';
    END IF;
    v_call := convo._open_tool_call(p_tool_call_id, 'request_input');
    SELECT * INTO v_request FROM convo.input_requests r WHERE r.tool_call_id = v_call.id;
    IF FOUND THEN
        RAISE EXCEPTION 'request_input: tool call % already has an input request (%, %)', v_call.id,
            v_request.kind, v_request.status USING ERRCODE = 'CV002';
    END IF;
    IF v_call.status <> 'started' THEN
        RAISE EXCEPTION 'request_input: tool call % is %: ask before the tool writes output', v_call.id, v_call.status
            USING ERRCODE = 'CV002';
    END IF;
    INSERT INTO convo.input_requests (tool_call_id, conversation_id, prompt_id, kind, request, expires_at)
    VALUES (v_call.id, v_call.conversation_id, v_call.prompt_id, p_kind, p_request, p_expires_at)
    RETURNING * INTO v_request;
    PERFORM convo._input_event(v_request, 'inputRequested',
        jsonb_build_object('inputRequest', convo._input_request_json(v_request)));
END;
$$;

-- request_input asks a person for input on a started tool call (one that
-- wrote no output yet) of a running prompt: kind 'approval' (request {} or
-- {"message": text}), 'client_tool' (the client runs the tool: {} or
-- {"outputSchema": object}) or 'question' ({"question": text, "choices":
-- [text, …]}, choices optional). At most one request per tool call. A
-- request with expires_at expires then (expire_leases). The call stays
-- started while the request is pending; the worker then calls
-- wait_prompt. CV003 for a bad kind, request or expires_at (in the past);
-- CV001 for an unknown tool call; CV002 unless the call is started and
-- its prompt running, or when it has a request already. Event:
-- inputRequested.
CREATE OR REPLACE FUNCTION convo.request_input(tool_call_id uuid, kind text, request jsonb DEFAULT '{}',
                                               expires_at timestamptz DEFAULT NULL) RETURNS void
LANGUAGE sql AS $$
    SELECT convo._request_input(request_input.tool_call_id, request_input.kind, request_input.request,
                                request_input.expires_at)
$$;

-- wait_prompt parks the running prompt that worker holds until every input
-- request of its open tool calls is answered: the prompt goes back to
-- queued with waiting true, its worker and lease cleared (heartbeat
-- returns false from now on), and attempts starts again from 0 (the claim
-- that resumes it is the first of the new run). It is not claimable until
-- the last request is answered or expires. It returns true when it parked
-- the prompt, and false, changing nothing, when every request of its
-- open tool calls was answered already (a fast answer): the worker reads
-- the answers (prompt_inputs) and goes on. CV002 unless the prompt is
-- running and held by worker, when a block of it still streams (end it
-- first), or when no open tool call of it has an input request. Event:
-- promptWaiting.
CREATE OR REPLACE FUNCTION convo.wait_prompt(prompt_id uuid, worker text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt  convo.prompts;
    v_message convo.messages;
    v_block   uuid;
    v_pending uuid[];
    v_open    integer;
BEGIN
    v_prompt := convo._running_prompt(wait_prompt.prompt_id, 'wait_prompt');
    IF v_prompt.worker IS DISTINCT FROM wait_prompt.worker THEN
        RAISE EXCEPTION 'wait_prompt: prompt % is held by %, not by %', v_prompt.id,
            coalesce(v_prompt.worker, 'no worker'), coalesce(wait_prompt.worker, 'NULL') USING ERRCODE = 'CV002';
    END IF;
    SELECT b.id INTO v_block FROM convo.blocks b
     WHERE b.prompt_id = v_prompt.id AND b.status = 'streaming'
     ORDER BY b.position LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'wait_prompt: block % of prompt % is still streaming: end it first', v_block, v_prompt.id
            USING ERRCODE = 'CV002';
    END IF;
    SELECT array_agg(r.tool_call_id ORDER BY t.started_at, t.id) FILTER (WHERE r.status = 'pending'), count(*)
      INTO v_pending, v_open
      FROM convo.input_requests r
      JOIN convo.tool_calls t ON t.id = r.tool_call_id
     WHERE r.prompt_id = v_prompt.id AND t.status IN ('started', 'running');
    IF v_open = 0 THEN
        RAISE EXCEPTION 'wait_prompt: prompt % has no input request to wait for', v_prompt.id
            USING ERRCODE = 'CV002', HINT = 'call convo.request_input on a started tool call first';
    END IF;
    IF v_pending IS NULL THEN
        RETURN false;
    END IF;
    UPDATE convo.prompts p
       SET status = 'queued', waiting = true, worker = NULL, lease_seconds = NULL, lease_expires_at = NULL,
           attempts = 0
     WHERE p.id = v_prompt.id
    RETURNING * INTO v_prompt;
    SELECT * INTO v_message FROM convo.messages m WHERE m.id = v_prompt.message_id;
    PERFORM convo._append_event(v_prompt.conversation_id, 'promptWaiting',
        jsonb_build_object('prompt', convo._prompt_json(v_prompt), 'toolCallIds', to_jsonb(v_pending),
                           'message', convo._message_json(v_message)),
        v_prompt.id);
    RETURN true;
END;
$$;
