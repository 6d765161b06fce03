-- name: EventsCompact :one
-- Compacts the delta events of up to max_prompts prompts that finished more
-- than older_than_seconds ago (db/functions/compaction.sql).
SELECT c.prompts::int AS prompts, c.events_removed::bigint AS events_removed
  FROM convo.compact_events(make_interval(secs => @older_than_seconds::double precision),
                            @max_prompts::int) c;

-- name: PromptQueueStats :one
-- The prompt queue for metrics: queued prompts (not those waiting for
-- input, which no worker can take) and the age of the oldest,
-- and running prompts. Both counts read partial indexes.
SELECT (SELECT count(*) FROM convo.prompts WHERE status = 'queued' AND NOT waiting)::bigint AS queued,
       (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)
          FROM convo.prompts WHERE status = 'queued' AND NOT waiting)::double precision AS oldest_queued_seconds,
       (SELECT count(*) FROM convo.prompts WHERE status = 'running')::bigint AS running;

-- name: NoteDatabaseIdentity :one
SELECT restored::boolean AS restored, conversations::bigint AS conversations, running::bigint AS running
FROM convo.note_database_identity();
