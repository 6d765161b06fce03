-- The event log: each change appends one event under its conversation's
-- lock, which hands out the next seq, and notifies (unless the logical feed
-- reads the WAL instead). The notification payloads are defined here, once;
-- docs/events.md lists them.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), so a change to a function is
-- an edit here. See db/README.md.

-- The notification payloads, each written only here. They are hints: a
-- listener that was away reads the log instead (docs/streaming.md).
--
--   convo_events   '<conversation id>:<seq>'   an event was appended
--                  '<conversation id>:deleted' the conversation was deleted
--   convo_prompts  'queued:<prompt id>'        a prompt waits for a worker
--                  'queued:*'                  prompts wait for a worker (one
--                                              transaction queued them all:
--                                              send_messages)
--                  'cancelled:<prompt id>'     a running prompt was cancelled
--
-- They are SQL functions of one expression, which PostgreSQL inlines into
-- their callers' statements: no function call on the hot path.
CREATE OR REPLACE FUNCTION convo._notify_event(p_conversation_id uuid, p_seq bigint) RETURNS void
LANGUAGE sql AS $$
    SELECT pg_notify('convo_events', p_conversation_id::text || ':' || p_seq::text)
$$;

CREATE OR REPLACE FUNCTION convo._notify_deleted(p_conversation_id uuid) RETURNS void
LANGUAGE sql AS $$
    SELECT pg_notify('convo_events', p_conversation_id::text || ':deleted')
$$;

-- p_kind is 'queued' or 'cancelled'.
CREATE OR REPLACE FUNCTION convo._notify_prompt(p_kind text, p_prompt_id uuid) RETURNS void
LANGUAGE sql AS $$
    SELECT pg_notify('convo_prompts', p_kind || ':' || p_prompt_id::text)
$$;

CREATE OR REPLACE FUNCTION convo._notify_queued() RETURNS void
LANGUAGE sql AS $$
    SELECT pg_notify('convo_prompts', 'queued:*')
$$;

-- _lock_conversation takes the conversation's row lock, which every writer of
-- the conversation holds until it commits. It raises CV001 for an unknown id.
CREATE OR REPLACE FUNCTION convo._lock_conversation(p_conversation_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM convo.conversations WHERE id = p_conversation_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conversation % does not exist', p_conversation_id USING ERRCODE = 'CV001';
    END IF;
END;
$$;

-- _append_event appends one event to the conversation's log with the next
-- seq (the caller holds the conversation's lock) and returns the seq. It
-- notifies "convo_events" only while the setting convo.notify_events is not
-- 'off'. A database whose servers all
-- use the logical feed turns it off (convo.set_event_notify), so its writers
-- pay no NOTIFY cost; the default, unset, notifies.
CREATE OR REPLACE FUNCTION convo._append_event(
    p_conversation_id uuid, p_kind text, p_payload jsonb,
    p_prompt_id uuid DEFAULT NULL, p_block_id uuid DEFAULT NULL, p_tool_call_id uuid DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_seq bigint;
BEGIN
    UPDATE convo.conversations SET last_seq = last_seq + 1
     WHERE id = p_conversation_id
    RETURNING last_seq INTO v_seq;
    INSERT INTO convo.events (conversation_id, seq, kind, prompt_id, block_id, tool_call_id, payload)
    VALUES (p_conversation_id, v_seq, p_kind, p_prompt_id, p_block_id, p_tool_call_id, p_payload);
    IF current_setting('convo.notify_events', true) IS DISTINCT FROM 'off' THEN
        PERFORM convo._notify_event(p_conversation_id, v_seq);
    END IF;
    RETURN v_seq;
END;
$$;

-- _append_events appends a batch of events to the conversation's log, in
-- the order of the arrays (element i of each is event i), with the next
-- seqs, and returns the last seq (the conversation's last_seq unchanged
-- when the batch is empty). The caller holds the conversation's lock. One
-- update of the conversation's row and one insert for the whole batch, and
-- one notification, with the last seq (a subscriber reads everything after
-- what it has delivered): a change that writes an event per row it touches
-- (the open tool calls of a cancelled prompt) costs the same per event
-- however many there are. _append_event once per event updates the
-- conversation's row once per event, and in one transaction each update
-- walks past the row's earlier versions of that transaction: quadratic.
CREATE OR REPLACE FUNCTION convo._append_events(
    p_conversation_id uuid, p_kinds text[], p_payloads jsonb[],
    p_prompt_ids uuid[], p_block_ids uuid[], p_tool_call_ids uuid[]
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_n    integer := coalesce(cardinality(p_kinds), 0);
    v_last bigint;
BEGIN
    IF coalesce(cardinality(p_payloads), 0) <> v_n OR coalesce(cardinality(p_prompt_ids), 0) <> v_n
       OR coalesce(cardinality(p_block_ids), 0) <> v_n OR coalesce(cardinality(p_tool_call_ids), 0) <> v_n THEN
        RAISE EXCEPTION '_append_events: the arrays of a batch must have one element per event (% kinds)', v_n;
    END IF;
    IF v_n = 0 THEN
        RETURN (SELECT c.last_seq FROM convo.conversations c WHERE c.id = p_conversation_id);
    END IF;
    UPDATE convo.conversations SET last_seq = last_seq + v_n
     WHERE id = p_conversation_id
    RETURNING last_seq INTO v_last;
    INSERT INTO convo.events (conversation_id, seq, kind, prompt_id, block_id, tool_call_id, payload)
    SELECT p_conversation_id, v_last - v_n + e.nth, e.kind, e.prompt_id, e.block_id, e.tool_call_id, e.payload
      FROM unnest(p_kinds, p_payloads, p_prompt_ids, p_block_ids, p_tool_call_ids)
           WITH ORDINALITY AS e(kind, payload, prompt_id, block_id, tool_call_id, nth)
     ORDER BY e.nth;
    IF current_setting('convo.notify_events', true) IS DISTINCT FROM 'off' THEN
        PERFORM convo._notify_event(p_conversation_id, v_last);
    END IF;
    RETURN v_last;
END;
$$;

-- set_event_notify sets whether the events of this database notify
-- "convo_events": for the database (ALTER DATABASE … SET
-- convo.notify_events, which sessions opened afterwards start with) and for
-- the calling session. Sessions already open keep their value until they
-- reconnect. The server calls it at start: on for CONVO_FEED=notify, off
-- for CONVO_FEED=logical; every server on one database must use the same
-- feed. It returns whether the database's setting changed. Changing it
-- needs the database's owner (or a superuser); confirming the current value
-- needs nothing.
CREATE OR REPLACE FUNCTION convo.set_event_notify(enabled boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_value   text := CASE WHEN enabled THEN 'on' ELSE 'off' END;
    v_current text;
BEGIN
    SELECT substr(s.setting, length('convo.notify_events=') + 1) INTO v_current
      FROM pg_db_role_setting d, unnest(d.setconfig) AS s(setting)
     WHERE d.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND d.setrole = 0
       AND s.setting LIKE 'convo.notify_events=%';
    PERFORM set_config('convo.notify_events', v_value, false);
    IF (v_current IS NOT DISTINCT FROM 'off') = (v_value = 'off') THEN
        RETURN false;
    END IF;
    EXECUTE format('ALTER DATABASE %I SET convo.notify_events = %L', current_database(), v_value);
    RETURN true;
END;
$$;
