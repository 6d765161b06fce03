-- +goose Up

-- The logical-replication feed (stream.LogicalFeed, CONVO_FEED=logical)
-- reads committed events from the WAL instead of NOTIFY: the event rows
-- themselves, in commit order, with no payload limit and without the
-- cluster-wide lock every notifying commit takes. docs/streaming.md has the
-- details.

-- convo_events publishes every new event row. Only inserts: the log is
-- append-only, and rows deleted with their conversation are not news.
CREATE PUBLICATION convo_events FOR TABLE convo.events WITH (publish = 'insert');

-- convo_deletions publishes deleted conversations (the old key, id), which
-- end their subscribers' streams. Updates of convo.conversations (one per
-- event, last_seq) are not published.
CREATE PUBLICATION convo_deletions FOR TABLE convo.conversations WITH (publish = 'delete');

-- _append_event (00002) again, now notifying "convo_events" only while the
-- setting convo.notify_events is not 'off'. A database whose servers all
-- use the logical feed turns it off (convo.set_event_notify), so its writers
-- pay no NOTIFY cost; the default, unset, notifies.
-- +goose StatementBegin
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
        PERFORM pg_notify('convo_events', p_conversation_id::text || ':' || v_seq::text);
    END IF;
    RETURN v_seq;
END;
$$;
-- +goose StatementEnd

-- set_event_notify sets whether the events of this database notify
-- "convo_events": for the database (ALTER DATABASE … SET
-- convo.notify_events, which sessions opened afterwards start with) and for
-- the calling session. Sessions already open keep their value until they
-- reconnect. The server calls it at start: on for CONVO_FEED=notify, off
-- for CONVO_FEED=logical; every server on one database must use the same
-- feed. It returns whether the database's setting changed. Changing it
-- needs the database's owner (or a superuser); confirming the current value
-- needs nothing.
-- +goose StatementBegin
CREATE FUNCTION convo.set_event_notify(enabled boolean) RETURNS boolean
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
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION convo.set_event_notify(boolean);
-- +goose StatementBegin
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
    PERFORM pg_notify('convo_events', p_conversation_id::text || ':' || v_seq::text);
    RETURN v_seq;
END;
$$;
-- +goose StatementEnd
DROP PUBLICATION convo_deletions;
DROP PUBLICATION convo_events;
