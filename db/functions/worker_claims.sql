-- The SQL worker API (docs/worker-api.md is the reference): taking and
-- holding a prompt. The process lease (worker_heartbeat) and a prompt's
-- own lease (heartbeat), the fair claim (claim_prompt), starting and
-- releasing a claimed prompt, and expire_leases, which fails or hands back
-- what a worker that stopped heartbeating held.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), in the order of
-- db.FunctionFiles, so a change to a function is an edit here. See
-- db/README.md.

-- _leases_due says whether a lease of each kind that expire_leases handles
-- has run out: running, a running prompt's; claimed, a claim's not
-- started. Each is one read of the first entry of the partial index of its
-- kind, ordered by the lease (prompts_running_lease_idx,
-- prompts_claimed_lease_idx). enable_sort is off for that: planned while
-- few prompts were held (a connection plans it once, at its first claim,
-- often on an idle queue), PostgreSQL preferred a scan of
-- prompts_held_idx and a sort, which reads every prompt held: 0.3 ms a
-- read at 1,500 replies running, on every claim.
CREATE OR REPLACE FUNCTION convo._leases_due(OUT running boolean, OUT claimed boolean)
LANGUAGE plpgsql STABLE SET enable_sort = off AS $$
BEGIN
    running := coalesce((SELECT p.lease_expires_at FROM convo.prompts p
                          WHERE p.status = 'running'
                          ORDER BY p.lease_expires_at
                          LIMIT 1) < now(), false);
    claimed := coalesce((SELECT p.lease_expires_at FROM convo.prompts p
                          WHERE p.status = 'queued' AND p.worker IS NOT NULL
                          ORDER BY p.lease_expires_at
                          LIMIT 1) < now(), false);
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
    v_running_due boolean;
    v_claimed_due boolean;
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
    -- Most calls find nothing due (a worker under its process lease holds
    -- its prompts with lease_expires_at 'infinity'): each pass below runs
    -- only when the earliest lease (or expiry) of its kind has run out
    -- (_leases_due; an input request's along input_requests_expiry_idx).
    SELECT * INTO v_running_due, v_claimed_due FROM convo._leases_due();
    IF v_running_due THEN
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
    END IF;
    -- Claims never started, handed back, and expired input requests, whose
    -- prompts may become claimable: both make an owner wait in
    -- convo.owner_queue (trigger _prompt_claimable, which waits for the
    -- owner's row), so they are taken in the order of their owners, and
    -- two calls at once take the owners' rows in one order.
    IF NOT v_claimed_due AND NOT coalesce((SELECT r.expires_at FROM convo.input_requests r
                                            WHERE r.status = 'pending' AND r.expires_at IS NOT NULL
                                            ORDER BY r.expires_at
                                            LIMIT 1) < now(), false) THEN
        RETURN v_count;
    END IF;
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
-- owners, and prompts, as are running). Whether an owner holds prompts is
-- a probe of prompts_held_idx per owner, fenced (OFFSET 0) as in
-- _claim_idle.
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
                              AND (h.status = 'running' OR (h.status = 'queued' AND h.worker IS NOT NULL))
                            OFFSET 0)
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
                   AND NOT p.awaiting_turn
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
                                   AND NOT p.waiting AND NOT p.awaiting_turn AND p.created_at >= v_since)
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
-- (CV002): it is claimed once answered; nor one awaiting its turn (CV002,
-- a queued send: _release_turn). Events: promptStarted,
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
     WHERE p.id = start_prompt.prompt_id AND p.status = 'queued' AND NOT p.waiting AND NOT p.awaiting_turn
    RETURNING * INTO v_prompt;
    IF NOT FOUND THEN
        SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = start_prompt.prompt_id;
        IF v_prompt.waiting THEN
            RAISE EXCEPTION 'start_prompt: prompt % is waiting for input, not claimed', v_prompt.id
                USING ERRCODE = 'CV002', HINT = 'an answer (or the requests'' expiry) queues it again; claim it then';
        END IF;
        IF v_prompt.awaiting_turn THEN
            RAISE EXCEPTION 'start_prompt: prompt % awaits its turn (a queued send: the reply before it is still in flight), not claimed',
                v_prompt.id USING ERRCODE = 'CV002';
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
