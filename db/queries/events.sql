-- name: EventListAfter :many
-- The conversation's events after after_seq, oldest first, at most max_events.
SELECT * FROM convo.events
 WHERE conversation_id = @conversation_id::uuid AND seq > @after_seq::bigint
 ORDER BY seq
 LIMIT @max_events::int;

-- name: EventListAfterMany :many
-- For each (conversation, after_seq) pair, the events after after_seq, at
-- most max_events per conversation: one round trip for many conversations.
WITH cursors AS (
    SELECT unnest(@conversation_ids::uuid[]) AS conversation_id,
           unnest(@after_seqs::bigint[]) AS after_seq
)
SELECT e.*
  FROM cursors c
  CROSS JOIN LATERAL (
      SELECT * FROM convo.events ev
       WHERE ev.conversation_id = c.conversation_id AND ev.seq > c.after_seq
       ORDER BY ev.seq
       LIMIT @max_events::int
  ) e
 ORDER BY e.conversation_id, e.seq;

-- name: EventNotifySet :one
-- Sets whether this database's events notify "convo_events" (on for the
-- NOTIFY feed, off for the logical-replication feed), for new sessions
-- and this one; returns whether the database's setting changed.
SELECT convo.set_event_notify(@enabled::boolean)::boolean AS changed;

-- name: ConversationIDsExisting :many
-- Which of ids are conversations that exist: the hub asks after its feed
-- reconnects, to end the streams of conversations deleted meanwhile.
SELECT id FROM convo.conversations WHERE id = ANY(@ids::uuid[]);
