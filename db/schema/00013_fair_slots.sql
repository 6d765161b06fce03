-- +goose Up

-- Fair running slots. A claim used to serve owners round-robin by the time
-- of their last claim alone, whatever they held; now the next prompt goes
-- to the waiting owner who holds the fewest prompts (running, or claimed
-- and not started), ties to the owner served least recently (never served
-- first, then the one whose oldest waiting prompt is oldest). And
-- claim_prompts takes a fourth argument, reserved: how many of the prompts
-- it may claim go only to owners who hold nothing, the headroom a pool
-- keeps for newcomers. The functions are in db/functions/worker_api.sql
-- and batch.sql; docs/worker-api.md is the reference.
--
-- * convo.owner_queue replaces convo.owner_claims: one row per owner who
--   queued a prompt, with the time of its last claim and since when its
--   oldest claimable prompt waits (NULL: none), so that a claim walks the
--   waiting owners in the order of their turns instead of sorting the
--   whole queue. A trigger sets waiting_since when a prompt becomes
--   claimable (queued, or handed back); claims move it on; a row left
--   naming prompts since cancelled or deleted is put right by the next
--   claim that reaches it.
-- * A claimed prompt whose lease runs out before it starts is handed back
--   (its worker cleared) by expire_leases, as release_prompt would, rather
--   than left claimable with its old worker: claimable now means queued
--   with no worker.

CREATE TABLE convo.owner_queue (
    owner_id        text        PRIMARY KEY,
    last_claimed_at timestamptz,
    waiting_since   timestamptz
);
INSERT INTO convo.owner_queue (owner_id, last_claimed_at, waiting_since)
SELECT coalesce(o.owner_id, w.owner_id), o.last_claimed_at, w.since
  FROM convo.owner_claims o
  FULL JOIN (SELECT p.owner_id, min(p.created_at) AS since FROM convo.prompts p
              WHERE p.status = 'queued' AND p.worker IS NULL
              GROUP BY p.owner_id) w ON w.owner_id = o.owner_id;
DROP TABLE convo.owner_claims;

-- The waiting owners in the order of their turns (after the prompts they
-- hold).
CREATE INDEX owner_queue_turn_idx ON convo.owner_queue (last_claimed_at NULLS FIRST, waiting_since, owner_id)
    WHERE waiting_since IS NOT NULL;
-- An owner's claimable prompts, oldest first.
CREATE INDEX prompts_claimable_idx ON convo.prompts (owner_id, created_at, id)
    WHERE status = 'queued' AND worker IS NULL;
-- The prompts an owner holds: running, or claimed and not started.
CREATE INDEX prompts_held_idx ON convo.prompts (owner_id)
    WHERE status = 'running' OR (status = 'queued' AND worker IS NOT NULL);
-- Claims whose lease may run out before their prompt starts.
CREATE INDEX prompts_claimed_lease_idx ON convo.prompts (lease_expires_at)
    WHERE status = 'queued' AND worker IS NOT NULL;

-- _prompt_claimable runs after a prompt becomes claimable: its owner waits
-- (since the prompt was queued, unless it already waited longer).
-- +goose StatementBegin
CREATE FUNCTION convo._prompt_claimable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO convo.owner_queue AS o (owner_id, waiting_since) VALUES (NEW.owner_id, NEW.created_at)
        ON CONFLICT (owner_id) DO UPDATE SET waiting_since = excluded.waiting_since
        WHERE o.waiting_since IS NULL OR o.waiting_since > excluded.waiting_since;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER prompts_claimable_insert AFTER INSERT ON convo.prompts
    FOR EACH ROW WHEN (NEW.status = 'queued' AND NEW.worker IS NULL)
    EXECUTE FUNCTION convo._prompt_claimable();
CREATE TRIGGER prompts_claimable_release AFTER UPDATE OF worker ON convo.prompts
    FOR EACH ROW WHEN (NEW.status = 'queued' AND NEW.worker IS NULL AND OLD.worker IS NOT NULL)
    EXECUTE FUNCTION convo._prompt_claimable();

-- claim_prompts(worker, lease_seconds, max_prompts) becomes
-- claim_prompts(worker, lease_seconds, max_prompts, reserved DEFAULT 0)
-- (db/functions/batch.sql): a call with three arguments means what it did.
DROP FUNCTION IF EXISTS convo.claim_prompts(text, integer, integer);

-- +goose Down
CREATE TABLE convo.owner_claims (
    owner_id        text        PRIMARY KEY,
    last_claimed_at timestamptz NOT NULL
);
INSERT INTO convo.owner_claims (owner_id, last_claimed_at)
SELECT q.owner_id, q.last_claimed_at FROM convo.owner_queue q WHERE q.last_claimed_at IS NOT NULL;

DROP TRIGGER prompts_claimable_release ON convo.prompts;
DROP TRIGGER prompts_claimable_insert ON convo.prompts;
DROP FUNCTION convo._prompt_claimable();
DROP INDEX convo.prompts_claimed_lease_idx;
DROP INDEX convo.prompts_held_idx;
DROP INDEX convo.prompts_claimable_idx;
DROP TABLE convo.owner_queue;
DROP FUNCTION IF EXISTS convo._claim_next(text, integer, boolean, integer);
DROP FUNCTION IF EXISTS convo.claim_prompts(text, integer, integer, integer);

-- claim_prompt, claim_prompts and expire_leases as before this migration.
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
        PERFORM 1 FROM convo.conversations c WHERE c.id = v_candidate.conversation_id FOR NO KEY UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        PERFORM 1 FROM convo.prompts
         WHERE id = v_candidate.id AND status = 'running' AND lease_expires_at < now();
        IF FOUND THEN
            PERFORM convo._finish_prompt(v_candidate.id, 'failed',
                format('lease expired: worker %s stopped heartbeating', v_candidate.worker));
            v_count := v_count + 1;
        END IF;
    END LOOP;
    RETURN v_count;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.claim_prompt(worker text, lease_seconds integer)
RETURNS TABLE (prompt_id uuid, conversation_id uuid, message_id uuid, model_config jsonb, attempts integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_id    uuid;
    v_owner text;
BEGIN
    PERFORM convo._check_claim('claim_prompt', worker, lease_seconds);
    PERFORM convo.expire_leases();
    SELECT q.id, q.owner_id INTO v_id, v_owner
      FROM convo.prompts q
      LEFT JOIN convo.owner_claims o ON o.owner_id = q.owner_id
     WHERE q.status = 'queued'
       AND (q.lease_expires_at IS NULL OR q.lease_expires_at < now())
     ORDER BY o.last_claimed_at NULLS FIRST, q.created_at, q.id
     LIMIT 1
       FOR UPDATE OF q SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO convo.owner_claims AS o (owner_id, last_claimed_at) VALUES (v_owner, clock_timestamp())
        ON CONFLICT (owner_id) DO UPDATE SET last_claimed_at = excluded.last_claimed_at;
    RETURN QUERY
    UPDATE convo.prompts p
       SET worker = claim_prompt.worker,
           lease_seconds = claim_prompt.lease_seconds,
           lease_expires_at = now() + make_interval(secs => claim_prompt.lease_seconds),
           attempts = p.attempts + 1
     WHERE p.id = v_id
    RETURNING p.id, p.conversation_id, p.message_id, p.model_config, p.attempts;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION convo.claim_prompts(worker text, lease_seconds integer, max_prompts integer)
RETURNS TABLE (prompt_id uuid, conversation_id uuid, message_id uuid, model_config jsonb, attempts integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_candidates uuid[];
    v_ids        uuid[];
    v_id         uuid;
BEGIN
    PERFORM convo._check_claim('claim_prompts', worker, lease_seconds);
    IF max_prompts IS NULL OR max_prompts < 1 OR max_prompts > 1000 THEN
        RAISE EXCEPTION 'claim_prompts: max_prompts must be between 1 and 1000, got %', max_prompts
            USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo.expire_leases();
    WITH queued AS (
        SELECT q.id, q.owner_id, o.last_claimed_at,
               row_number() OVER (PARTITION BY q.owner_id ORDER BY q.created_at, q.id) AS turn,
               min(q.created_at) OVER (PARTITION BY q.owner_id) AS owner_since
          FROM convo.prompts q
          LEFT JOIN convo.owner_claims o ON o.owner_id = q.owner_id
         WHERE q.status = 'queued'
           AND (q.lease_expires_at IS NULL OR q.lease_expires_at < now()))
    SELECT array_agg(q.id ORDER BY q.turn, q.last_claimed_at NULLS FIRST, q.owner_since, q.owner_id)
      INTO v_candidates
      FROM queued q;
    v_ids := '{}';
    FOREACH v_id IN ARRAY coalesce(v_candidates, '{}') LOOP
        EXIT WHEN cardinality(v_ids) >= max_prompts;
        PERFORM 1 FROM convo.prompts q
         WHERE q.id = v_id
           AND q.status = 'queued'
           AND (q.lease_expires_at IS NULL OR q.lease_expires_at < now())
           FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
            v_ids := v_ids || v_id;
        END IF;
    END LOOP;
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO convo.owner_claims AS o (owner_id, last_claimed_at)
    SELECT p.owner_id, clock_timestamp() + make_interval(secs => max(u.n) / 1e6)
      FROM unnest(v_ids) WITH ORDINALITY AS u(id, n)
      JOIN convo.prompts p ON p.id = u.id
     GROUP BY p.owner_id
        ON CONFLICT (owner_id) DO UPDATE SET last_claimed_at = excluded.last_claimed_at;
    UPDATE convo.prompts p
       SET worker = claim_prompts.worker,
           lease_seconds = claim_prompts.lease_seconds,
           lease_expires_at = now() + make_interval(secs => claim_prompts.lease_seconds),
           attempts = p.attempts + 1
     WHERE p.id = ANY (v_ids);
    RETURN QUERY
    SELECT p.id, p.conversation_id, p.message_id, p.model_config, p.attempts
      FROM unnest(v_ids) WITH ORDINALITY AS u(id, n)
      JOIN convo.prompts p ON p.id = u.id
     ORDER BY u.n;
END;
$$;
-- +goose StatementEnd
