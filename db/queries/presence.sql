-- name: PresenceNotify :exec
-- Sends one batch of presence records (package presence) to every server
-- of the database; nothing is stored.
SELECT pg_notify('convo_presence', @payload::text);
