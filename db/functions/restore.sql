-- A database restored from a backup (docs/deploy.md, "Backups").
--
-- A restored log is a prefix of the original's: the original went on
-- writing after the dump (or the recovery target), so a client that read
-- it holds events at seqs the restored database will write again, with
-- other contents. A resume (afterSeq, Last-Event-ID) from such a seq would
-- splice two different histories. Every server calls
-- note_database_identity at start: when the database's identity changed
-- since it was last noted, every conversation's seq jumps by 2^40, past
-- any seq the original can have written, so a resume from before the
-- jump finds the log not contiguous and gets a snapshot; and the leases
-- of the workers the dump remembers, which are not this database's, end
-- now, so their running replies fail at once (expire_leases) instead of
-- when the leases would have run out.

-- _database_identity is the identity of the current database: the
-- cluster's system identifier, the database's oid and the timeline. The
-- control functions need no privilege on PostgreSQL 15; a provider that
-- refuses them leaves the identity to the oid and what it allows.
CREATE OR REPLACE FUNCTION convo._database_identity(OUT system_identifier text, OUT database_oid oid, OUT timeline integer)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT d.oid INTO database_oid FROM pg_database d WHERE d.datname = current_database();
    BEGIN
        SELECT s.system_identifier::text INTO system_identifier FROM pg_control_system() s;
        SELECT c.timeline_id INTO timeline FROM pg_control_checkpoint() c;
    EXCEPTION WHEN insufficient_privilege THEN
        NULL;
    END;
END;
$$;

-- note_database_identity records the database's identity the first time
-- and compares it afterwards. When it changed (a restore, or a copy to
-- another cluster), it moves every conversation's seq forward by 2^40 and
-- ends the leases held before, and returns restored = true with the
-- number of conversations moved and of replies that were running. Servers
-- starting at once take the identity's row in turn, so one of them does
-- it. The caller is the role that owns the schema.
CREATE OR REPLACE FUNCTION convo.note_database_identity(
    OUT restored boolean, OUT conversations bigint, OUT running bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_now   convo.database_identity;
    v_known convo.database_identity;
BEGIN
    restored := false;
    conversations := 0;
    running := 0;
    SELECT i.system_identifier, i.database_oid, i.timeline
      INTO v_now.system_identifier, v_now.database_oid, v_now.timeline
      FROM convo._database_identity() i;
    INSERT INTO convo.database_identity (system_identifier, database_oid, timeline)
    VALUES (v_now.system_identifier, v_now.database_oid, v_now.timeline)
    ON CONFLICT (only_row) DO NOTHING;
    IF FOUND THEN
        RETURN; -- the first start on this database
    END IF;
    SELECT * INTO v_known FROM convo.database_identity FOR UPDATE;
    -- A NULL on one side is an identity part the provider hides: it
    -- compares only what both sides know.
    IF v_known.database_oid = v_now.database_oid
       AND (v_known.system_identifier IS NULL OR v_now.system_identifier IS NULL
            OR v_known.system_identifier = v_now.system_identifier)
       AND (v_known.timeline IS NULL OR v_now.timeline IS NULL OR v_known.timeline = v_now.timeline) THEN
        RETURN;
    END IF;
    restored := true;
    UPDATE convo.conversations SET last_seq = last_seq + (1::bigint << 40);
    GET DIAGNOSTICS conversations = ROW_COUNT;
    SELECT count(*) INTO running FROM convo.prompts WHERE status = 'running';
    -- The workers of the original are not this database's: their leases
    -- end now, and expire_leases (here, and every reaper after) fails
    -- their running replies and hands back what they claimed.
    UPDATE convo.workers SET expires_at = now() - interval '1 second'
     WHERE NOT expired AND expires_at >= now();
    UPDATE convo.prompts SET lease_expires_at = now() - interval '1 second'
     WHERE worker IS NOT NULL AND status IN ('queued', 'running') AND lease_expires_at >= now();
    PERFORM convo.expire_leases();
    UPDATE convo.database_identity
       SET system_identifier = v_now.system_identifier, database_oid = v_now.database_oid,
           timeline = v_now.timeline, noted_at = now(),
           restores = restores + 1, restored_at = now();
END;
$$;
