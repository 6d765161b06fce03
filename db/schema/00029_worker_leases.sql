-- +goose Up

-- Liveness per worker process, not per prompt (docs/worker-api.md, "Two
-- leases"). A worker process keeps one lease, a row here extended by
-- convo.worker_heartbeat; a prompt claimed while its worker's lease is
-- live carries lease_expires_at = 'infinity' and is alive as long as that
-- lease is. When the lease runs out, convo.expire_leases gives each of
-- the worker's prompts the lease's end as its own (expired: the ones
-- running fail, the ones claimed go back to the queue, as a prompt lease
-- that ran out does) and marks the row expired.
CREATE TABLE convo.workers (
    name          text        PRIMARY KEY CHECK (name <> ''),
    lease_seconds integer     NOT NULL CHECK (lease_seconds BETWEEN 1 AND 3600),
    -- the first heartbeat of the current lease (a lease that expired and
    -- was taken again starts anew)
    started_at    timestamptz NOT NULL DEFAULT now(),
    beat_at       timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    -- the lease ran out and its prompts were handed their own leases
    expired       boolean     NOT NULL DEFAULT false
);
-- expire_leases: the live leases that ran out, oldest first.
CREATE INDEX workers_expiry_idx ON convo.workers (expires_at) WHERE NOT expired;
-- A worker's prompts held under its process lease. (The indexes of the
-- reaper on lease_expires_at keep working: 'infinity' sorts last, so their
-- scans for leases before now() never reach these.)
CREATE INDEX prompts_worker_leased_idx ON convo.prompts (worker) WHERE lease_expires_at = 'infinity';

-- +goose Down
DROP FUNCTION IF EXISTS convo.worker_heartbeat(text, integer, boolean);
DROP FUNCTION IF EXISTS convo._worker_lease(text, integer);
DROP FUNCTION IF EXISTS convo._let_go_prompts(text, timestamptz, boolean);
UPDATE convo.prompts p
   SET lease_expires_at = coalesce((SELECT w.expires_at FROM convo.workers w WHERE w.name = p.worker), now())
 WHERE p.lease_expires_at = 'infinity';
DROP INDEX convo.prompts_worker_leased_idx;
DROP TABLE convo.workers;
