-- +goose Up

-- Where the log was written (docs/deploy.md, "Backups"): the identity of
-- the database convo.note_database_identity last saw. A database restored
-- from a dump, a base backup or a point in time, or moved to another
-- cluster, has another identity, and its log may stop short of what
-- clients already read from the original; the function then moves every
-- conversation's seq past anything the original could have written, so
-- that no resume picks up from a seq the restored log does not share.
CREATE TABLE convo.database_identity (
    only_row          boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    -- pg_control_system().system_identifier: NULL where the provider
    -- does not let the owner read it.
    system_identifier text,
    database_oid      oid NOT NULL,
    -- pg_control_checkpoint().timeline_id: a point-in-time recovery or a
    -- promotion starts a new timeline.
    timeline          integer,
    noted_at          timestamptz NOT NULL DEFAULT now(),
    -- How many times a restore was found, and when last.
    restores          integer NOT NULL DEFAULT 0,
    restored_at       timestamptz
);

-- +goose Down
DROP FUNCTION IF EXISTS convo.note_database_identity();
DROP TABLE convo.database_identity;
