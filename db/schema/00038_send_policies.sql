-- +goose Up

-- Send policies (docs/api.md, "Sending while a reply runs"): what a send
-- does when a reply of its conversation is still queued or running.
--
-- * convo.conversations.send_policy: the conversation's default, one of
--   'enqueue', 'interrupt', 'reject'; NULL: the server's, 'enqueue'.
-- * A send enqueued behind a reply in flight writes its user message and
--   its pending replies at once (messages.queued true, shown as queued to
--   every reader) and its prompts with prompts.awaiting_turn true: queued
--   (status 'queued', in flight: the conversation's and the quota's) but
--   not claimable, and not making their owner wait in convo.owner_queue.
--   When the last prompt of the conversation that is not awaiting its turn
--   ends (_finish_prompt: complete, fail, cancel, lease expiry, a batch's
--   ends), the oldest queued send's prompts turn claimable, in the same
--   transaction (_release_turn), by the trigger prompts_claimable_turn, as
--   a newly queued prompt does.
ALTER TABLE convo.conversations ADD COLUMN send_policy text
    CHECK (send_policy IN ('enqueue', 'interrupt', 'reject'));
ALTER TABLE convo.messages ADD COLUMN queued boolean NOT NULL DEFAULT false;
ALTER TABLE convo.prompts ADD COLUMN awaiting_turn boolean NOT NULL DEFAULT false;
-- NOT VALID: every row has awaiting_turn false, nothing to check.
ALTER TABLE convo.prompts ADD CONSTRAINT prompts_awaiting_turn_check
    CHECK (NOT awaiting_turn OR (status = 'queued' AND worker IS NULL AND NOT waiting)) NOT VALID;

-- The queue of a conversation, in send order; empty almost always, so
-- _finish_prompt's look at it costs one probe of an empty index.
CREATE INDEX prompts_awaiting_turn_idx ON convo.prompts (conversation_id, created_at, id) WHERE awaiting_turn;

-- Claimable: queued, held by no worker, not waiting for an answer, and
-- not awaiting its turn.
DROP INDEX convo.prompts_claimable_idx;
CREATE INDEX prompts_claimable_idx ON convo.prompts (owner_id, created_at, id)
    WHERE status = 'queued' AND worker IS NULL AND NOT waiting AND NOT awaiting_turn;

DROP TRIGGER prompts_claimable_insert ON convo.prompts;
CREATE TRIGGER prompts_claimable_insert AFTER INSERT ON convo.prompts
    FOR EACH ROW WHEN (NEW.status = 'queued' AND NEW.worker IS NULL AND NOT NEW.waiting AND NOT NEW.awaiting_turn)
    EXECUTE FUNCTION convo._prompt_claimable();
-- A queued send whose turn came.
CREATE TRIGGER prompts_claimable_turn AFTER UPDATE OF awaiting_turn ON convo.prompts
    FOR EACH ROW WHEN (OLD.awaiting_turn AND NOT NEW.awaiting_turn AND NEW.status = 'queued' AND NEW.worker IS NULL
                       AND NOT NEW.waiting)
    EXECUTE FUNCTION convo._prompt_claimable();

-- send_messages takes each item's policy (an optional last argument, so
-- the previous release's calls keep working; send_message reads it from
-- the setting convo.send_policy, its signature unchanged) and returns
-- whether each item was queued (a last column, which the previous
-- release's named columns do not read): the old signature goes, and
-- db/functions/client_messages.sql defines the new one. set_send_policy,
-- delete_queued_message and _release_turn are new.
DROP FUNCTION IF EXISTS convo.send_messages(text[], uuid[], text[], text[], uuid[], text[], text[]);

-- +goose Down
DROP FUNCTION IF EXISTS convo.set_send_policy(text, uuid, text);
DROP FUNCTION IF EXISTS convo.delete_queued_message(text, uuid);
DROP FUNCTION IF EXISTS convo._release_turn(uuid);
DROP FUNCTION IF EXISTS convo.send_messages(text[], uuid[], text[], text[], uuid[], text[], text[], text[]);
-- The previous definitions of the functions this migration's release
-- changed: they read nothing it added.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._refresh_active_prompt(p_conversation_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
BEGIN
    UPDATE convo.conversations c
       SET active_prompt_id = a.id, updated_at = now()
      FROM (SELECT (SELECT p.id FROM convo.prompts p
                     WHERE p.conversation_id = p_conversation_id
                       AND p.status IN ('queued', 'running')
                     ORDER BY p.created_at DESC, p.id DESC LIMIT 1) AS id) a
     WHERE c.id = p_conversation_id
       AND c.active_prompt_id IS DISTINCT FROM a.id
    RETURNING c.* INTO v_conv;
    IF FOUND THEN
        PERFORM convo._append_event(p_conversation_id, 'conversationUpdated',
            jsonb_build_object('conversation', convo._conversation_json(v_conv)));
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._finish_prompt(p_prompt_id uuid, p_status text, p_error text,
                                                p_usage jsonb DEFAULT NULL) RETURNS convo.prompts
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt  convo.prompts;
    v_message convo.messages;
    v_block   convo.blocks;
    v_kind    text;
BEGIN
    PERFORM convo._fail_open_calls(p_prompt_id, 'prompt ' || p_status || ' before the tool call finished');
    FOR v_block IN
        SELECT * FROM convo.blocks b
         WHERE b.prompt_id = p_prompt_id AND b.status = 'streaming'
         ORDER BY b.position
    LOOP
        PERFORM convo._end_block(v_block, NULL, false);
    END LOOP;

    UPDATE convo.prompts
       SET status = p_status, error = p_error, ended_at = now(), lease_expires_at = NULL, waiting = false
     WHERE id = p_prompt_id
    RETURNING * INTO v_prompt;
    v_kind := CASE p_status WHEN 'completed' THEN 'promptCompleted'
                            WHEN 'failed' THEN 'promptFailed'
                            ELSE 'promptCancelled' END;
    PERFORM convo._append_event(v_prompt.conversation_id, v_kind,
        convo._object(jsonb_build_object('prompt', convo._prompt_json(v_prompt), 'error', p_error, 'usage', p_usage)),
        v_prompt.id);

    UPDATE convo.messages SET status = p_status, updated_at = now()
     WHERE id = v_prompt.message_id
    RETURNING * INTO v_message;
    PERFORM convo._append_event(v_prompt.conversation_id, 'messageUpdated',
        jsonb_build_object('message', convo._message_json(v_message)), v_prompt.id);

    PERFORM convo._refresh_active_prompt(v_prompt.conversation_id);
    RETURN v_prompt;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._claim_next(p_worker text, p_lease_seconds integer, p_idle_only boolean,
                                             p_max integer DEFAULT 1) RETURNS uuid[]
LANGUAGE plpgsql AS $$
DECLARE
    v_owner   text;
    v_since   timestamptz;
    v_idle    boolean;
    v_alone   boolean;
    v_ids     uuid[];
    -- owners this call looked at and could not take a prompt from
    v_skip    text[] := '{}';
    -- the claims' lease: 'infinity' under a live process lease
    v_lease   timestamptz := convo._worker_lease(p_worker, p_lease_seconds);
BEGIN
    LOOP
        v_idle := true;
        v_alone := false;
        SELECT q.owner_id, q.waiting_since INTO v_owner, v_since
          FROM convo.owner_queue q
         WHERE q.waiting_since IS NOT NULL
           AND q.owner_id <> ALL (v_skip)
           AND NOT EXISTS (SELECT 1 FROM convo.prompts h
                            WHERE h.owner_id = q.owner_id
                              AND (h.status = 'running' OR (h.status = 'queued' AND h.worker IS NOT NULL)))
         ORDER BY q.last_claimed_at NULLS FIRST, q.waiting_since, q.owner_id
         LIMIT 1
           FOR UPDATE OF q SKIP LOCKED;
        IF NOT FOUND AND NOT p_idle_only THEN
            -- Every waiting owner holds prompts. One alone is the pick; of
            -- several, the one who holds the fewest.
            v_idle := false;
            SELECT count(*) = 1 INTO v_alone
              FROM (SELECT 1 FROM convo.owner_queue q
                     WHERE q.waiting_since IS NOT NULL AND q.owner_id <> ALL (v_skip)
                     LIMIT 2) w;
            IF v_alone THEN
                SELECT q.owner_id, q.waiting_since INTO v_owner, v_since
                  FROM convo.owner_queue q
                 WHERE q.waiting_since IS NOT NULL AND q.owner_id <> ALL (v_skip)
                   FOR UPDATE OF q SKIP LOCKED;
            ELSE
                SELECT q.owner_id, q.waiting_since INTO v_owner, v_since
                  FROM (SELECT h.owner_id, count(*) AS held FROM convo.prompts h
                         WHERE h.status = 'running' OR (h.status = 'queued' AND h.worker IS NOT NULL)
                         GROUP BY h.owner_id) c
                  JOIN convo.owner_queue q ON q.owner_id = c.owner_id
                 WHERE q.waiting_since IS NOT NULL
                   AND q.owner_id <> ALL (v_skip)
                 ORDER BY c.held, q.last_claimed_at NULLS FIRST, q.waiting_since, q.owner_id
                 LIMIT 1
                   FOR UPDATE OF q SKIP LOCKED;
            END IF;
        END IF;
        IF NOT FOUND THEN
            RETURN '{}';
        END IF;
        v_skip := v_skip || v_owner;
        -- The owner's row is ours now, so no other claim serves it; but one
        -- may have done so since this statement's snapshot.
        CONTINUE WHEN v_idle AND EXISTS (
            SELECT 1 FROM convo.prompts h
             WHERE h.owner_id = v_owner
               AND (h.status = 'running' OR (h.status = 'queued' AND h.worker IS NOT NULL)));
        -- No claimable prompt of the owner is older than waiting_since
        -- (the trigger and the update below keep it so): the scans start
        -- there, past the prompts claimed before, whose index entries
        -- outlive them until a vacuum.
        SELECT coalesce(array_agg(c.id ORDER BY c.created_at, c.id), '{}') INTO v_ids
          FROM (SELECT p.id, p.created_at FROM convo.prompts p
                 WHERE p.owner_id = v_owner AND p.status = 'queued' AND p.worker IS NULL AND NOT p.waiting
                   AND p.created_at >= v_since
                 ORDER BY p.created_at, p.id
                 LIMIT CASE WHEN v_alone THEN greatest(p_max, 1) ELSE 1 END
                   FOR NO KEY UPDATE SKIP LOCKED) c;
        UPDATE convo.prompts p
           SET worker = p_worker,
               lease_seconds = p_lease_seconds,
               lease_expires_at = v_lease,
               attempts = p.attempts + 1
         WHERE p.id = ANY (v_ids);
        -- The owner's turn moves on (clock_timestamp, not now(): the
        -- claims of one transaction must still order their owners), and
        -- it waits from its next claimable prompt, if any. An owner whose
        -- waiting prompts were cancelled or deleted stops waiting here.
        UPDATE convo.owner_queue q
           SET last_claimed_at = CASE WHEN v_ids = '{}' THEN q.last_claimed_at ELSE clock_timestamp() END,
               waiting_since = (SELECT min(p.created_at) FROM convo.prompts p
                                 WHERE p.owner_id = v_owner AND p.status = 'queued' AND p.worker IS NULL
                                   AND NOT p.waiting AND p.created_at >= v_since)
         WHERE q.owner_id = v_owner;
        IF v_ids <> '{}' THEN
            RETURN v_ids;
        END IF;
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.start_prompt(prompt_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt  convo.prompts;
    v_message convo.messages;
BEGIN
    SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = start_prompt.prompt_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'start_prompt: prompt % does not exist', start_prompt.prompt_id USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._lock_conversation(v_prompt.conversation_id);
    UPDATE convo.prompts p
       SET status = 'running', started_at = coalesce(p.started_at, now()),
           lease_expires_at = CASE WHEN p.lease_expires_at = 'infinity' THEN p.lease_expires_at
                                   ELSE now() + make_interval(secs => coalesce(p.lease_seconds, 30)) END
     WHERE p.id = start_prompt.prompt_id AND p.status = 'queued' AND NOT p.waiting
    RETURNING * INTO v_prompt;
    IF NOT FOUND THEN
        SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = start_prompt.prompt_id;
        IF v_prompt.waiting THEN
            RAISE EXCEPTION 'start_prompt: prompt % is waiting for input, not claimed', v_prompt.id
                USING ERRCODE = 'CV002', HINT = 'an answer (or the requests'' expiry) queues it again; claim it then';
        END IF;
        RAISE EXCEPTION 'start_prompt: prompt % is %, not queued', v_prompt.id, v_prompt.status
            USING ERRCODE = 'CV002';
    END IF;
    PERFORM convo._append_event(v_prompt.conversation_id, 'promptStarted',
        jsonb_build_object('prompt', convo._prompt_json(v_prompt)), v_prompt.id);
    UPDATE convo.messages SET status = 'processing', updated_at = now()
     WHERE id = v_prompt.message_id
    RETURNING * INTO v_message;
    PERFORM convo._append_event(v_prompt.conversation_id, 'messageUpdated',
        jsonb_build_object('message', convo._message_json(v_message)), v_prompt.id);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
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
                                  AND (h.status = 'running' OR (h.status = 'queued' AND h.worker IS NOT NULL)))
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
                              AND (h.status = 'running' OR (h.status = 'queued' AND h.worker IS NOT NULL)))),
    picked AS (
        SELECT o.owner_id, o.n, o.waiting_since, p.id
          FROM o
         CROSS JOIN LATERAL (
               SELECT p.id FROM convo.prompts p
                WHERE p.owner_id = o.owner_id AND p.status = 'queued' AND p.worker IS NULL AND NOT p.waiting
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
                                   AND NOT p.waiting AND p.created_at >= o.waiting_since
                                   AND p.id IS DISTINCT FROM k.id)
          FROM o
          LEFT JOIN picked k ON k.owner_id = o.owner_id
         WHERE q.owner_id = o.owner_id)
    SELECT coalesce(array_agg(c.id ORDER BY c.n), '{}') INTO v_ids FROM claimed c;
    RETURN v_ids;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.clear_conversation(p_owner_id text, p_conversation_id uuid)
RETURNS convo.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv   convo.conversations;
    v_prompt uuid;
BEGIN
    PERFORM convo._owned_conversation(p_owner_id, p_conversation_id, 'clear_conversation');
    FOR v_prompt IN
        SELECT p.id FROM convo.prompts p
         WHERE p.conversation_id = p_conversation_id AND p.status IN ('queued', 'running')
         ORDER BY p.created_at
    LOOP
        PERFORM convo._finish_prompt(v_prompt, 'cancelled', NULL);
        PERFORM convo._notify_prompt('cancelled', v_prompt);
    END LOOP;
    DELETE FROM convo.messages WHERE conversation_id = p_conversation_id;
    UPDATE convo.conversations SET active_prompt_id = NULL, updated_at = now()
     WHERE id = p_conversation_id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'historyCleared',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));
    SELECT * INTO v_conv FROM convo.conversations WHERE id = p_conversation_id;
    RETURN v_conv;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.send_message(p_owner_id text, p_conversation_id uuid, p_text text, p_model_configs jsonb,
                                              p_parent_message_id uuid DEFAULT NULL, p_file_ids uuid[] DEFAULT '{}')
RETURNS TABLE (conversation_id uuid, user_message_id uuid, assistant_message_ids uuid[], prompt_ids uuid[],
               comparison_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv       convo.conversations;
    v_leaf       uuid;
    v_user       convo.messages;
    v_assistant  convo.messages;
    v_prompt     convo.prompts;
    v_config     jsonb;
    v_slot       integer := 0;
    v_comparison uuid;
    v_messages   uuid[] := '{}';
    v_prompts    uuid[] := '{}';
    v_title      text;
    -- The send's events, appended together at its end (one update of the
    -- conversation's row for all of them, not one each).
    v_kinds      text[] := '{}';
    v_payloads   jsonb[] := '{}';
    v_event_ps   uuid[] := '{}';
BEGIN
    IF (p_text IS NULL OR NOT convo._has_visible(p_text)) AND cardinality(coalesce(p_file_ids, '{}')) = 0 THEN
        RAISE EXCEPTION 'send_message: text must not be empty or only whitespace, control, zero-width, bidi control or blank (U+2800, ...) characters'
            USING ERRCODE = 'CV003';
    END IF;
    IF jsonb_typeof(p_model_configs) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_model_configs) NOT BETWEEN 1 AND 2
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_model_configs) c WHERE jsonb_typeof(c.value) <> 'object') THEN
        RAISE EXCEPTION 'send_message: model_configs must be a JSON array of one or two objects' USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._json_check(p_model_configs, 'send_message: model_configs');
    IF p_parent_message_id IS NOT NULL AND p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'send_message: parentMessageId % names a message of a conversation, and conversationId is not set',
            p_parent_message_id USING ERRCODE = 'CV003';
    END IF;

    -- The owner, then the quota, before anything is written or locked.
    IF p_conversation_id IS NOT NULL THEN
        PERFORM convo._check_owner(p_owner_id, p_conversation_id, 'send_message');
    END IF;
    PERFORM convo._check_prompt_quota(p_owner_id, jsonb_array_length(p_model_configs), 'send_message');

    IF p_conversation_id IS NULL THEN
        INSERT INTO convo.conversations (owner_id) VALUES (p_owner_id) RETURNING * INTO v_conv;
    ELSE
        v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'send_message');
        IF EXISTS (SELECT 1 FROM convo.prompts p WHERE p.conversation_id = v_conv.id AND p.waiting) THEN
            RAISE EXCEPTION 'send_message: a reply is waiting for an answer: answer or cancel it'
                USING ERRCODE = 'CV002';
        END IF;
    END IF;

    -- The message hangs below the active leaf (below slot "a" of a
    -- comparison), its replies below it; the caller's idea of the leaf is
    -- checked here, under the lock _owned_conversation took.
    v_leaf := convo._active_leaf(v_conv.id);
    IF p_parent_message_id IS NOT NULL AND p_parent_message_id IS DISTINCT FROM v_leaf
       AND NOT EXISTS (SELECT 1 FROM convo.messages b JOIN convo.messages a ON a.comparison_id = b.comparison_id
                        WHERE b.id = p_parent_message_id AND b.conversation_id = v_conv.id AND a.id = v_leaf) THEN
        RAISE EXCEPTION 'send_message: parentMessageId % is not the active leaf of conversation %: the active leaf is now % (the conversation changed since it was read: read it again)',
            p_parent_message_id, v_conv.id, coalesce(v_leaf::text, 'none, the conversation has no messages')
            USING ERRCODE = 'CV002';
    END IF;
    INSERT INTO convo.messages (conversation_id, position, role, status, parent_id)
    VALUES (v_conv.id, v_conv.last_seq + 1, 'user', 'completed', v_leaf)
    RETURNING * INTO v_user;
    PERFORM convo._write_user_blocks(p_owner_id, v_user, p_text, p_file_ids, 'send_message');
    v_kinds := v_kinds || 'messageCreated'::text;
    v_payloads := v_payloads || jsonb_build_object('message',
        convo._message_json(v_user) || jsonb_build_object('blocks',
            (SELECT jsonb_agg(convo._block_json(b) ORDER BY b.position) FROM convo.blocks b WHERE b.message_id = v_user.id)));
    v_event_ps := v_event_ps || NULL::uuid;

    -- Create every prompt (and the comparison) first, then announce them,
    -- so each message's first event already carries its comparison.
    FOR v_config IN SELECT c.value FROM jsonb_array_elements(p_model_configs) c LOOP
        v_slot := v_slot + 1;
        INSERT INTO convo.messages (conversation_id, position, role, status, comparison_slot, parent_id)
        VALUES (v_conv.id, v_user.position + v_slot, 'assistant', 'pending',
                CASE WHEN jsonb_array_length(p_model_configs) = 2 THEN chr(ascii('a') + v_slot - 1) END, v_user.id)
        RETURNING * INTO v_assistant;
        INSERT INTO convo.prompts (conversation_id, message_id, model_config, trace_context)
        VALUES (v_conv.id, v_assistant.id, v_config, convo._trace_context())
        RETURNING * INTO v_prompt;
        v_messages := v_messages || v_assistant.id;
        v_prompts := v_prompts || v_prompt.id;
    END LOOP;
    IF v_slot = 2 THEN
        INSERT INTO convo.comparisons (conversation_id, user_message_id, prompt_a, prompt_b)
        VALUES (v_conv.id, v_user.id, v_prompts[1], v_prompts[2])
        RETURNING id INTO v_comparison;
        UPDATE convo.messages m SET comparison_id = v_comparison WHERE m.id = ANY (v_messages);
    END IF;
    FOR i IN 1 .. v_slot LOOP
        SELECT * INTO v_assistant FROM convo.messages m WHERE m.id = v_messages[i];
        SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = v_prompts[i];
        v_kinds := v_kinds || ARRAY['messageCreated', 'promptQueued'];
        v_payloads := v_payloads || ARRAY[jsonb_build_object('message', convo._message_json(v_assistant)),
                                          jsonb_build_object('prompt', convo._prompt_json(v_prompt))];
        v_event_ps := v_event_ps || ARRAY[v_prompt.id, v_prompt.id];
        IF current_setting('convo.notify_prompts', true) IS DISTINCT FROM 'off' THEN
            PERFORM convo._notify_prompt('queued', v_prompt.id);
        END IF;
    END LOOP;

    -- Only a conversation without a title takes one (v_conv was read
    -- under its lock): the regular expressions of _title_from_text are a
    -- tenth of a send's time, not spent on every later message.
    IF v_conv.title = '' THEN
        v_title := convo._title_from_text(p_text);
        IF v_title = '' THEN
            -- A message of files only: its first file's name.
            SELECT convo._title_from_text(b.metadata->>'filename') INTO v_title
              FROM convo.blocks b WHERE b.message_id = v_user.id AND b.block_type = 'file' ORDER BY b.position LIMIT 1;
        END IF;
    END IF;
    UPDATE convo.conversations c
       SET title = CASE WHEN c.title = '' THEN coalesce(v_title, '') ELSE c.title END,
           active_prompt_id = v_prompts[1],
           last_message_at = now(),
           updated_at = now()
     WHERE c.id = v_conv.id
    RETURNING * INTO v_conv;
    v_kinds := v_kinds || 'conversationUpdated'::text;
    v_payloads := v_payloads || jsonb_build_object('conversation', convo._conversation_json(v_conv));
    v_event_ps := v_event_ps || NULL::uuid;
    PERFORM convo._append_events(v_conv.id, v_kinds, v_payloads, v_event_ps,
                                 array_fill(NULL::uuid, ARRAY[cardinality(v_kinds)]),
                                 array_fill(NULL::uuid, ARRAY[cardinality(v_kinds)]));

    RETURN QUERY SELECT v_conv.id, v_user.id, v_messages, v_prompts, v_comparison;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.send_messages(p_owner_ids text[], p_conversation_ids uuid[], p_texts text[],
                                               p_model_configs text[], p_parent_message_ids uuid[], p_file_ids text[],
                                               p_trace_contexts text[] DEFAULT NULL)
RETURNS TABLE (ord integer, conversation_id uuid, user_message_id uuid, assistant_message_ids uuid[],
               prompt_ids uuid[], comparison_id uuid, error_code text, error_message text, error_detail text)
LANGUAGE plpgsql AS $$
DECLARE
    v_n       integer := coalesce(cardinality(p_owner_ids), 0);
    v_events  text := current_setting('convo.notify_events', true);
    v_prompts text := current_setting('convo.notify_prompts', true);
    v_trace   text := current_setting('convo.trace_context', true);
    v_convs   uuid[] := '{}';
    v_queued  boolean := false;
    v_sent    record;
BEGIN
    IF coalesce(cardinality(p_conversation_ids), 0) <> v_n OR coalesce(cardinality(p_texts), 0) <> v_n
       OR coalesce(cardinality(p_model_configs), 0) <> v_n OR coalesce(cardinality(p_parent_message_ids), 0) <> v_n
       OR coalesce(cardinality(p_file_ids), 0) <> v_n
       OR (p_trace_contexts IS NOT NULL AND cardinality(p_trace_contexts) <> v_n) THEN
        RAISE EXCEPTION 'send_messages: the arrays must have one element per message (% owner ids)', v_n
            USING ERRCODE = 'CV003';
    END IF;
    -- The items notify once per conversation and once for all their
    -- prompts, below.
    PERFORM set_config('convo.notify_events', 'off', true);
    PERFORM set_config('convo.notify_prompts', 'off', true);
    FOR i IN 1 .. v_n LOOP
        ord := i;
        BEGIN
            IF p_trace_contexts IS NOT NULL THEN
                -- The item's prompts keep its trace context (_trace_context).
                PERFORM set_config('convo.trace_context',
                                   convo._check_trace_context(p_trace_contexts[i], format('trace_contexts[%s]', i)), true);
            END IF;
            SELECT s.* INTO v_sent
              FROM convo.send_message(p_owner_ids[i], p_conversation_ids[i], p_texts[i], p_model_configs[i]::jsonb,
                                      p_parent_message_ids[i], coalesce(p_file_ids[i], '{}')::uuid[]) s;
            conversation_id := v_sent.conversation_id;
            user_message_id := v_sent.user_message_id;
            assistant_message_ids := v_sent.assistant_message_ids;
            prompt_ids := v_sent.prompt_ids;
            comparison_id := v_sent.comparison_id;
            error_code := NULL;
            error_message := NULL;
            error_detail := NULL;
            v_convs := v_convs || v_sent.conversation_id;
            v_queued := true;
        EXCEPTION WHEN OTHERS THEN
            conversation_id := NULL;
            user_message_id := NULL;
            assistant_message_ids := NULL;
            prompt_ids := NULL;
            comparison_id := NULL;
            GET STACKED DIAGNOSTICS error_code = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                    error_detail = PG_EXCEPTION_DETAIL;
            error_detail := nullif(error_detail, '');
        END;
        RETURN NEXT;
    END LOOP;
    PERFORM set_config('convo.notify_events', coalesce(v_events, ''), true);
    PERFORM set_config('convo.notify_prompts', coalesce(v_prompts, ''), true);
    IF p_trace_contexts IS NOT NULL THEN
        PERFORM set_config('convo.trace_context', coalesce(v_trace, ''), true);
    END IF;
    IF v_events IS DISTINCT FROM 'off' THEN
        PERFORM convo._notify_event(c.id, c.last_seq) FROM convo.conversations c WHERE c.id = ANY (v_convs);
    END IF;
    IF v_queued THEN
        PERFORM convo._notify_queued();
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._conversation_json(c convo.conversations) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT convo._object(jsonb_build_object(
        'id', c.id,
        'title', nullif(c.title, ''),
        'activePromptId', c.active_prompt_id,
        'createdAt', convo._ts(c.created_at),
        'updatedAt', convo._ts(c.updated_at),
        'lastMessageAt', convo._ts(c.last_message_at)))
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._message_json(m convo.messages) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT jsonb_strip_nulls(jsonb_build_object(
            'id', m.id,
            'conversationId', m.conversation_id,
            'role', m.role,
            'status', m.status,
            'promptId', p.id,
            'error', CASE WHEN m.status = 'failed' THEN nullif(p.error, '') END,
            'createdAt', convo._ts(m.created_at),
            'updatedAt', convo._ts(m.updated_at),
            'feedback', CASE WHEN m.feedback_rating IS NOT NULL THEN jsonb_build_object(
                'rating', 'RATING_' || upper(m.feedback_rating),
                'comment', nullif(m.feedback_comment, ''),
                'createdAt', convo._ts(m.feedback_at)) END,
            'comparisonId', m.comparison_id,
            'comparisonSlot', m.comparison_slot,
            'parentId', m.parent_id,
            'siblingCount', sp.sibling_count,
            'siblingIndex', sp.sibling_index))
          FROM convo._sibling_place(m) sp
          LEFT JOIN convo.prompts p ON p.message_id = m.id);
END;
$$;
-- +goose StatementEnd
DROP TRIGGER prompts_claimable_turn ON convo.prompts;
DROP TRIGGER prompts_claimable_insert ON convo.prompts;
CREATE TRIGGER prompts_claimable_insert AFTER INSERT ON convo.prompts
    FOR EACH ROW WHEN (NEW.status = 'queued' AND NEW.worker IS NULL AND NOT NEW.waiting)
    EXECUTE FUNCTION convo._prompt_claimable();
DROP INDEX convo.prompts_claimable_idx;
CREATE INDEX prompts_claimable_idx ON convo.prompts (owner_id, created_at, id)
    WHERE status = 'queued' AND worker IS NULL AND NOT waiting;
DROP INDEX convo.prompts_awaiting_turn_idx;
ALTER TABLE convo.prompts DROP CONSTRAINT prompts_awaiting_turn_check;
ALTER TABLE convo.prompts DROP COLUMN awaiting_turn;
ALTER TABLE convo.messages DROP COLUMN queued;
ALTER TABLE convo.conversations DROP COLUMN send_policy;
