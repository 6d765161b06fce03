-- The batch form of the SQL worker API: one call writes the pending output
-- of many replies in one transaction (docs/worker-api.md, "Many replies in
-- one transaction").
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), so a change to a function is
-- an edit here. See db/README.md.

-- claim_prompts claims up to max_prompts prompts for worker at once, each
-- as a call of claim_prompt would take it (the fair order of _claim_next:
-- the waiting owner who holds the fewest prompts first, counting those
-- this call claimed), and returns them in that order. Of the max_prompts,
-- the last reserved go only to owners who hold nothing: a pool with n free
-- slots of which r are kept for newcomers calls it with (n, r), so that
-- an owner with a backlog never takes the last r slots, and a user who
-- sends a first prompt starts at once. It stops at the first prompt it
-- cannot claim.
CREATE OR REPLACE FUNCTION convo.claim_prompts(worker text, lease_seconds integer, max_prompts integer,
                                               reserved integer DEFAULT 0)
RETURNS TABLE (prompt_id uuid, conversation_id uuid, message_id uuid, model_config jsonb, attempts integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_ids  uuid[] := '{}';
    v_next uuid[];
BEGIN
    PERFORM convo._check_claim('claim_prompts', worker, lease_seconds);
    IF max_prompts IS NULL OR max_prompts < 1 OR max_prompts > 1000 THEN
        RAISE EXCEPTION 'claim_prompts: max_prompts must be between 1 and 1000, got %', max_prompts
            USING ERRCODE = 'CV003';
    END IF;
    IF reserved IS NULL OR reserved < 0 OR reserved > max_prompts THEN
        RAISE EXCEPTION 'claim_prompts: reserved must be between 0 and max_prompts (%), got %',
            max_prompts, coalesce(reserved::text, 'NULL') USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo.expire_leases();
    -- First every owner who holds nothing, one prompt each, in one pass
    -- (the order _claim_next would serve them in: it prefers them, and
    -- each claim makes its owner hold one); then claim by claim, each
    -- counting the ones before. Past max_prompts - reserved, only owners
    -- who hold nothing are served.
    v_ids := convo._claim_idle(claim_prompts.worker, claim_prompts.lease_seconds, max_prompts);
    WHILE cardinality(v_ids) < max_prompts LOOP
        v_next := convo._claim_next(claim_prompts.worker, claim_prompts.lease_seconds,
                                    cardinality(v_ids) >= max_prompts - reserved,
                                    max_prompts - reserved - cardinality(v_ids));
        EXIT WHEN v_next = '{}';
        v_ids := v_ids || v_next;
    END LOOP;
    RETURN QUERY
    SELECT p.id, p.conversation_id, p.message_id, p.model_config, p.attempts
      FROM unnest(v_ids) WITH ORDINALITY AS u(id, n)
      JOIN convo.prompts p ON p.id = u.id
     ORDER BY u.n;
END;
$$;

-- _claim_idle claims for worker, for lease_seconds, the oldest claimable
-- prompt of each of up to p_max waiting owners who hold nothing, in the
-- order of their turns, and returns their ids in that order: what as many
-- calls of _claim_next would claim while such owners wait, in a few
-- statements instead of several per prompt (a burst of replies of a user
-- each is all such owners). Owners and prompts that other claims hold
-- locked are skipped, never waited for; an owner served by another claim
-- since this call began is left out (checked again once its row is
-- locked), as _claim_next leaves it. An owner whose turn came and who has
-- no claimable prompt left (cancelled, deleted) stops waiting.
--
-- Whether an owner holds prompts is one probe of prompts_held_idx by the
-- owner (NOT EXISTS (… OFFSET 0): the fence keeps it a probe per owner).
-- As a join, planned while few prompts were held (a worker's connection
-- plans it once, at its first claim, often on an idle queue), it read
-- every held prompt for every owner: 2.5 ms a claim at 1,500 replies
-- running, and growing with each.
CREATE OR REPLACE FUNCTION convo._claim_idle(p_worker text, p_lease_seconds integer, p_max integer) RETURNS uuid[]
LANGUAGE plpgsql AS $$
DECLARE
    v_owners text[];
    v_ids    uuid[];
    v_lease  timestamptz;
    -- the turns of the owners served, one microsecond apart in claim
    -- order, as _claim_next's clock_timestamp() per claim orders them
    v_now    timestamptz := clock_timestamp();
BEGIN
    SELECT coalesce(array_agg(o.owner_id ORDER BY o.last_claimed_at NULLS FIRST, o.waiting_since, o.owner_id), '{}')
      INTO v_owners
      FROM (SELECT q.owner_id, q.last_claimed_at, q.waiting_since FROM convo.owner_queue q
             WHERE q.waiting_since IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM convo.prompts h
                                WHERE h.owner_id = q.owner_id
                                  AND (h.status = 'running' OR (h.status = 'queued' AND h.worker IS NOT NULL))
                                OFFSET 0)
             ORDER BY q.last_claimed_at NULLS FIRST, q.waiting_since, q.owner_id
             LIMIT p_max
               FOR UPDATE OF q SKIP LOCKED) o;
    IF v_owners = '{}' THEN
        RETURN '{}';
    END IF;
    v_lease := convo._worker_lease(p_worker, p_lease_seconds);
    -- The owners' rows are ours now, so no other claim serves them; but
    -- one may have done so since the statement above began (this one
    -- sees its claims).
    WITH o AS (
        SELECT u.owner_id, u.n, q.waiting_since
          FROM unnest(v_owners) WITH ORDINALITY AS u(owner_id, n)
          JOIN convo.owner_queue q ON q.owner_id = u.owner_id
         WHERE NOT EXISTS (SELECT 1 FROM convo.prompts h
                            WHERE h.owner_id = u.owner_id
                              AND (h.status = 'running' OR (h.status = 'queued' AND h.worker IS NOT NULL))
                            OFFSET 0)),
    picked AS (
        SELECT o.owner_id, o.n, o.waiting_since, p.id
          FROM o
         CROSS JOIN LATERAL (
               SELECT p.id FROM convo.prompts p
                WHERE p.owner_id = o.owner_id AND p.status = 'queued' AND p.worker IS NULL AND NOT p.waiting
                  AND NOT p.awaiting_turn
                  AND p.created_at >= o.waiting_since
                ORDER BY p.created_at, p.id
                LIMIT 1
                  FOR NO KEY UPDATE SKIP LOCKED) p),
    claimed AS (
        UPDATE convo.prompts p
           SET worker = p_worker, lease_seconds = p_lease_seconds, lease_expires_at = v_lease,
               attempts = p.attempts + 1
          FROM picked k
         WHERE p.id = k.id
        RETURNING p.id, k.n),
    -- Every owner served moves on to its next turn, and waits from its
    -- next claimable prompt, if any (no claimable prompt found: it stops
    -- waiting, or waits from the one another transaction holds locked).
    turned AS (
        UPDATE convo.owner_queue q
           SET last_claimed_at = CASE WHEN k.id IS NULL THEN q.last_claimed_at
                                      ELSE v_now + make_interval(secs => o.n / 1e6) END,
               waiting_since = (SELECT min(p.created_at) FROM convo.prompts p
                                 WHERE p.owner_id = o.owner_id AND p.status = 'queued' AND p.worker IS NULL
                                   AND NOT p.waiting AND NOT p.awaiting_turn AND p.created_at >= o.waiting_since
                                   AND p.id IS DISTINCT FROM k.id)
          FROM o
          LEFT JOIN picked k ON k.owner_id = o.owner_id
         WHERE q.owner_id = o.owner_id)
    SELECT coalesce(array_agg(c.id ORDER BY c.n), '{}') INTO v_ids FROM claimed c;
    RETURN v_ids;
END;
$$;

-- _batch_owner raises CV001 unless the block (or tool call) exists and
-- belongs to the prompt an op of write_batch names: a batch writes only
-- into the replies it says it writes.
CREATE OR REPLACE FUNCTION convo._batch_owner(p_prompt_id uuid, p_block_id uuid, p_tool_call_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_block_id IS NOT NULL THEN
        PERFORM 1 FROM convo.blocks b WHERE b.id = p_block_id AND b.prompt_id = p_prompt_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'write_batch: block % does not exist in prompt %', p_block_id, p_prompt_id
                USING ERRCODE = 'CV001';
        END IF;
    END IF;
    IF p_tool_call_id IS NOT NULL THEN
        PERFORM 1 FROM convo.tool_calls t WHERE t.id = p_tool_call_id AND t.prompt_id = p_prompt_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'write_batch: tool call % does not exist in prompt %', p_tool_call_id, p_prompt_id
                USING ERRCODE = 'CV001';
        END IF;
    END IF;
END;
$$;

-- _uuid_pattern is the pattern of a uuid's text that write_batch accepts.
CREATE OR REPLACE FUNCTION convo._uuid_pattern() RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$'
$$;

-- _batch_uuid reads the uuid field of an op, raising CV003 when it is
-- missing or malformed.
CREATE OR REPLACE FUNCTION convo._batch_uuid(p_op jsonb, p_field text) RETURNS uuid
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_text text := p_op->>p_field;
BEGIN
    IF v_text IS NULL OR v_text !~* convo._uuid_pattern() THEN
        RAISE EXCEPTION 'write_batch: op "%" needs "%" (a uuid), got %', p_op->>'op', p_field, coalesce((p_op->p_field)::text, 'nothing')
            USING ERRCODE = 'CV003';
    END IF;
    RETURN v_text::uuid;
END;
$$;

-- _batch_apply applies one op of write_batch: the worker API function of
-- its kind, with the same checks and events. The caller holds the locks of
-- every conversation of the batch.
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
        -- A whole number from 1: a seq below 1 would pass for a retry of
        -- an append applied already (applied, doing nothing), and a
        -- fraction would be rounded.
        IF jsonb_typeof(p_op->'seq') IS DISTINCT FROM 'number'
           OR (CASE WHEN p_op->>'seq' ~ '^[0-9]{1,10}$' THEN (p_op->>'seq')::bigint NOT BETWEEN 1 AND 2147483647
                    ELSE true END) THEN
            RAISE EXCEPTION 'write_batch: op "append" needs "seq", the number of this append to its block (a whole number: 1, 2, 3, …), got %',
                coalesce((p_op->'seq')::text, 'nothing') USING ERRCODE = 'CV003';
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
    WHEN 'request_input' THEN
        v_call_id := convo._batch_uuid(p_op, 'toolCall');
        PERFORM convo._batch_owner(p_prompt_id, NULL, v_call_id);
        IF p_op ? 'expiresAt' AND NOT coalesce(p_op->>'expiresAt' ~
               '^\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)$', false) THEN
            RAISE EXCEPTION 'write_batch: op "request_input" takes "expiresAt" as an RFC 3339 time, got %', p_op->'expiresAt'
                USING ERRCODE = 'CV003';
        END IF;
        PERFORM convo._request_input(v_call_id, p_op->>'kind', coalesce(p_op->'request', '{}'),
                                     (p_op->>'expiresAt')::timestamptz);
    WHEN 'wait_prompt' THEN
        PERFORM convo.wait_prompt(p_prompt_id, p_worker);
    WHEN 'complete_prompt' THEN
        -- Without usage, the call of one argument: it means the same
        -- on a schema migrated down before usage was taken.
        IF p_op ? 'usage' THEN
            PERFORM convo.complete_prompt(p_prompt_id, p_op->'usage');
        ELSE
            PERFORM convo.complete_prompt(p_prompt_id);
        END IF;
    WHEN 'fail_prompt' THEN
        PERFORM convo.fail_prompt(p_prompt_id, p_op->>'error');
    END CASE;
END;
$$;

-- _batch_starts applies, in a few statements for all of them, the ops of
-- write_batch that start replies: those of each prompt whose ops are
-- start_prompt, or start_block and its first append, or the three
-- (start_prompt, start_block, append), the shapes a worker's first
-- batches of a reply take (the Go runtime's urgent lane). It returns the
-- indexes in ops of the ops it applied; write_batch applies every other op
-- one by one (_batch_apply), after it. Each prompt's writes and events are those of
-- the calls one by one: promptStarted and messageUpdated (start_prompt),
-- blockStart (start_block), blockDelta (append_block), with the same
-- payloads and seqs. The caller holds the locks of the batch's
-- conversations and prompts.
--
-- A prompt is taken only when nothing the calls one by one would check
-- can fail, or differ, for it: it is not refused (p_refused), no other
-- prompt of the batch writes to its conversation, worker holds it (so it
-- neither waits for input nor awaits its turn: the checks of
-- convo.prompts hold such a prompt by no worker), it is queued (to start)
-- or running (for a block alone), the block
-- is new (its id well formed and unused, its type a name other than
-- file, no metadata but {}), the append is the block's first (seq 1) and
-- holds text, and no other block of the conversation takes deltas
-- (conversations.delta_block_id is NULL). Any other prompt's ops go one
-- by one, with their checks and errors. So nothing it takes can raise,
-- and write_batch runs it, as its statement for appends, outside the
-- subtransaction of the ops one by one, once.
--
-- One by one, a start and its first text were some 35 statements and
-- four updates of the conversation's row (docs/performance.md, "What a
-- claim and a start cost").
CREATE OR REPLACE FUNCTION convo._batch_starts(p_worker text, p_ops jsonb, p_prompts uuid[], p_counts integer[],
                                               p_refused jsonb)
RETURNS integer[]
LANGUAGE plpgsql AS $$
DECLARE
    v_uuid constant text := convo._uuid_pattern();
    v_done integer[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM unnest(p_counts) n WHERE n <= 3) THEN
        RETURN '{}';
    END IF;
    WITH mine AS (
        SELECT u.id FROM unnest(p_prompts, p_counts) AS u(id, n)
         WHERE u.n <= 3 AND NOT p_refused ? u.id::text),
    -- Each such prompt's ops, in order: the start (or NULL), the block's
    -- and the append's (or NULL).
    grouped AS (
        SELECT (x.o->>'prompt')::uuid AS prompt_id,
               array_agg(x.o ORDER BY x.i) AS o, array_agg((x.i - 1)::integer ORDER BY x.i) AS i
          FROM jsonb_array_elements(p_ops) WITH ORDINALITY AS x(o, i)
         WHERE (x.o->>'prompt')::uuid IN (SELECT m.id FROM mine m)
         GROUP BY 1),
    shaped AS (
        SELECT g.prompt_id, g.i, g.o[1]->>'op' = 'start_prompt' AS starts,
               CASE WHEN g.o[1]->>'op' = 'start_prompt' THEN g.o[2] ELSE g.o[1] END AS b,
               CASE WHEN g.o[1]->>'op' = 'start_prompt' THEN g.o[3] ELSE g.o[2] END AS a
          FROM grouped g),
    -- (A uuid is read only from a text that is one.)
    fit AS (
        SELECT s.prompt_id, s.i, s.starts, s.b, s.a,
               CASE WHEN s.b->>'block' ~* v_uuid THEN (s.b->>'block')::uuid END AS block_id
          FROM shaped s
         WHERE cardinality(s.i) = (CASE WHEN s.starts THEN 1 ELSE 0 END) + (CASE WHEN s.b IS NULL THEN 0 ELSE 2 END)
           AND (s.b IS NULL OR (
                    s.b->>'op' = 'start_block' AND s.a->>'op' = 'append'
                AND CASE WHEN s.b->>'block' ~* v_uuid AND s.a->>'block' ~* v_uuid
                         THEN (s.b->>'block')::uuid = (s.a->>'block')::uuid ELSE false END
                AND coalesce(s.b->>'type' ~ '^[a-z][a-z0-9_]{0,63}$' AND s.b->>'type' <> 'file', false)
                AND (NOT s.b ? 'metadata' OR s.b->'metadata' = '{}'::jsonb)
                AND jsonb_typeof(s.a->'seq') = 'number' AND s.a->>'seq' = '1'
                AND jsonb_typeof(s.a->'text') = 'string' AND s.a->>'text' <> ''))),
    -- The prompts of the batch, per conversation: one alone may go here.
    per_conv AS (
        SELECT p.conversation_id FROM convo.prompts p
         WHERE p.id = ANY (p_prompts)
         GROUP BY 1
        HAVING count(*) = 1),
    taken AS (
        SELECT f.prompt_id, f.i, f.starts, f.block_id, f.b->>'type' AS block_type, f.a->>'text' AS delta,
               p.conversation_id, p.message_id, c.last_seq
          FROM fit f
          JOIN convo.prompts p ON p.id = f.prompt_id
          JOIN per_conv pc ON pc.conversation_id = p.conversation_id
          JOIN convo.conversations c ON c.id = p.conversation_id
         WHERE p.worker = p_worker
           AND p.status = CASE WHEN f.starts THEN 'queued' ELSE 'running' END
           AND (f.b IS NULL OR (f.block_id IS NOT NULL AND c.delta_block_id IS NULL
                                AND NOT EXISTS (SELECT 1 FROM convo.blocks b WHERE b.id = f.block_id)))),
    started AS (
        UPDATE convo.prompts p
           SET status = 'running', started_at = coalesce(p.started_at, now()),
               lease_expires_at = CASE WHEN p.lease_expires_at = 'infinity' THEN p.lease_expires_at
                                       ELSE now() + make_interval(secs => coalesce(p.lease_seconds, 30)) END
          FROM taken t
         WHERE p.id = t.prompt_id AND t.starts
        RETURNING p AS prompt),
    processing AS (
        UPDATE convo.messages m SET status = 'processing', updated_at = now()
          FROM taken t
         WHERE m.id = t.message_id AND t.starts
        RETURNING m AS message),
    -- A block's start_seq is its blockStart's seq, after the start's two
    -- events.
    opened AS (
        INSERT INTO convo.blocks (id, conversation_id, message_id, prompt_id, position, block_type, status, metadata,
                                  start_seq)
        SELECT t.block_id, t.conversation_id, t.message_id, t.prompt_id,
               (SELECT coalesce(max(b.position) + 1, 0) FROM convo.blocks b WHERE b.message_id = t.message_id),
               t.block_type, 'streaming', '{}', t.last_seq + CASE WHEN t.starts THEN 3 ELSE 1 END
          FROM taken t
         WHERE t.block_id IS NOT NULL
        RETURNING *),
    counted AS (
        UPDATE convo.conversations c
           SET last_seq = c.last_seq + CASE WHEN t.starts THEN 2 ELSE 0 END
                                     + CASE WHEN t.block_id IS NULL THEN 0 ELSE 2 END,
               delta_block_id = coalesce(t.block_id, c.delta_block_id),
               delta_count = CASE WHEN t.block_id IS NULL THEN c.delta_count ELSE 1 END
          FROM taken t
         WHERE c.id = t.conversation_id),
    logged AS (
        INSERT INTO convo.events (conversation_id, seq, kind, prompt_id, block_id, payload)
        SELECT e.conversation_id, e.seq, e.kind, e.prompt_id, e.block_id, e.payload
          FROM (SELECT t.conversation_id, t.last_seq + 1 AS seq, 'promptStarted' AS kind, t.prompt_id,
                       NULL::uuid AS block_id, jsonb_build_object('prompt', convo._prompt_json(s.prompt)) AS payload
                  FROM taken t JOIN started s ON (s.prompt).id = t.prompt_id
                UNION ALL
                SELECT t.conversation_id, t.last_seq + 2, 'messageUpdated', t.prompt_id, NULL,
                       jsonb_build_object('message', convo._message_json(m.message))
                  FROM taken t JOIN processing m ON (m.message).id = t.message_id
                UNION ALL
                SELECT t.conversation_id, b.start_seq, 'blockStart', t.prompt_id, b.id,
                       jsonb_build_object('promptId', t.prompt_id, 'messageId', t.message_id,
                                          'blockId', b.id, 'blockType', b.block_type,
                                          'metadata', b.metadata, 'position', b.position)
                  FROM taken t JOIN opened b ON b.id = t.block_id
                UNION ALL
                SELECT t.conversation_id, b.start_seq + 1, 'blockDelta', t.prompt_id, b.id,
                       jsonb_build_object('promptId', t.prompt_id, 'messageId', t.message_id,
                                          'blockId', b.id, 'content', t.delta)
                  FROM taken t JOIN opened b ON b.id = t.block_id) e)
    SELECT coalesce(array_agg(n), '{}') INTO v_done FROM taken t, unnest(t.i) AS n;
    RETURN v_done;
END;
$$;

-- write_batch applies ops, the pending output of any number of replies
-- (prompts) that worker holds, in one transaction: each op is one call of
-- the worker API (see docs/worker-api.md for the op kinds and their
-- fields), applied in the order given, so each reply's events keep their
-- order and every conversation's seqs stay gap-free.
--
-- A reply whose write is refused never fails the others: when an op
-- raises (its prompt was cancelled or deleted, is no longer worker's,
-- writes to an ended block, …), the ops of that prompt from that one on are
-- left out and the rest of the batch is applied again without them. The
-- result has one row per refused prompt: the index (0-based) in ops of the
-- first op not applied (every earlier op of that prompt was applied) and
-- the error's SQLSTATE and message. No row: everything was applied.
--
-- batch numbers worker's calls and must grow from call to call. A call
-- with the number of the last batch applied for worker applies nothing and
-- answers as that batch did: a worker that lost the answer (its connection
-- broke around the commit) sends the same batch again. A smaller number
-- raises CV002. A worker that writes batches on several connections at
-- once gives each its own lane (0, 1, …), numbered on its own; batches of
-- different lanes run at the same time, and a prompt's ops must always go
-- through one lane (or wait for the answer before using another). Malformed input (no worker, ops not an array of objects
-- each naming its "prompt" and a known "op") raises CV003 and changes
-- nothing.
--
-- Each conversation the batch wrote events to gets one notification for
-- the whole batch (convo_events '<conversation id>:<last seq>') instead of
-- one per event.
CREATE OR REPLACE FUNCTION convo.write_batch(worker text, batch bigint, ops jsonb, lane integer DEFAULT 0)
RETURNS TABLE (prompt_id uuid, op_index integer, code text, message text)
LANGUAGE plpgsql AS $$
DECLARE
    v_kinds    constant text[] := ARRAY['start_prompt', 'heartbeat', 'start_block', 'append', 'end_block',
                                        'start_tool_call', 'tool_progress', 'complete_tool_call',
                                        'fail_tool_call', 'request_input', 'wait_prompt', 'complete_prompt',
                                        'fail_prompt'];
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
    -- an op starts a prompt or a block; a prompt's one op is an append
    v_starting boolean;
    v_single   boolean;
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
    SELECT * INTO v_mark FROM convo.worker_batches w
     WHERE w.worker = write_batch.worker AND w.lane = write_batch.lane
       FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO convo.worker_batches AS w (worker, lane, batch) VALUES (write_batch.worker, write_batch.lane, -1)
            ON CONFLICT ON CONSTRAINT worker_batches_pkey DO NOTHING;
        IF FOUND THEN
            -- A new worker: forget the marks of workers silent for a day
            -- (a worker sends a batch again within seconds).
            DELETE FROM convo.worker_batches w WHERE w.written_at < now() - interval '1 day';
        END IF;
        SELECT * INTO v_mark FROM convo.worker_batches w
         WHERE w.worker = write_batch.worker AND w.lane = write_batch.lane
           FOR UPDATE;
    END IF;
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
    -- number of ops; whether an op starts a prompt or a block, and
    -- whether a prompt's one op is an append (the statements for those,
    -- below, run only then).
    SELECT array_agg(f.id ORDER BY f.id), array_agg(f.first ORDER BY f.id), array_agg(f.n ORDER BY f.id),
           coalesce(bool_or(f.starts), false), coalesce(bool_or(f.n = 1 AND f.appends), false)
      INTO v_prompts, v_firsts, v_counts, v_starting, v_single
      FROM (SELECT (x.o->>'prompt')::uuid AS id, (min(x.i) - 1)::integer AS first, count(*)::integer AS n,
                   bool_or(x.o->>'op' IN ('start_prompt', 'start_block')) AS starts,
                   bool_and(x.o->>'op' = 'append') AS appends
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
    IF v_single THEN
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
    END IF;

    -- The starts and first texts of the batch's replies, in a few
    -- statements (_batch_starts), as the appends above: for the prompts
    -- whose ops nothing below could refuse.
    IF v_starting THEN
        FOREACH v_index IN ARRAY convo._batch_starts(write_batch.worker, ops, v_prompts, v_counts, v_refused) LOOP
            v_done[v_index + 1] := true;
        END LOOP;
    END IF;

    -- Apply. An op that raises rolls back this attempt (one subtransaction,
    -- so the transaction never holds more than one), its prompt is refused
    -- from that op on, and the batch is applied again without those ops.
    -- Each pass refuses one more op, so the loop ends. Errors that are not
    -- about an op (a deadlock, a shutdown, an out-of-memory) abort the
    -- whole call.
    -- (Nothing left when the statements above applied every op.)
    IF false = ANY (v_done) THEN
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
    END IF;
    PERFORM set_config('convo.notify_events', coalesce(v_notify, ''), true);

    IF v_notify IS DISTINCT FROM 'off' THEN
        PERFORM convo._notify_event(c.id, c.last_seq)
           FROM unnest(v_convs, v_seqs) AS l(id, last_seq)
           JOIN convo.conversations c ON c.id = l.id
          WHERE c.last_seq > l.last_seq;
    END IF;

    UPDATE convo.worker_batches w
       SET batch = write_batch.batch, written_at = now(),
           refused = CASE WHEN v_refused = '{}' THEN '[]' ELSE
                     (SELECT coalesce(jsonb_agg(r.value || jsonb_build_object('prompt', r.key) ORDER BY (r.value->>'index')::integer), '[]')
                        FROM jsonb_each(v_refused) r) END
     WHERE w.worker = write_batch.worker AND w.lane = write_batch.lane
    RETURNING w.refused INTO v_mark.refused;
    RETURN QUERY
    SELECT (r->>'prompt')::uuid, (r->>'index')::integer, r->>'code', r->>'message'
      FROM jsonb_array_elements(v_mark.refused) r;
END;
$$;
