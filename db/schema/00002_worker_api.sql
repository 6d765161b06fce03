-- +goose Up

-- The SQL worker API. Workers in any language write replies by calling the
-- functions below (docs/worker-api.md is the reference). Each call is one
-- unit: it locks the conversation, checks the state change, writes the rows,
-- appends its events and notifies, in the caller's transaction. An illegal
-- call raises one of these SQLSTATEs and changes nothing:
--
--   CV001  not found: an unknown prompt, block, tool call or conversation
--   CV002  illegal state change: a write to an ended block, to a prompt that
--          is not running, a second tool call on one block, …
--   CV003  invalid argument: a malformed block_type, metadata that is not a
--          JSON object, an empty name or error, structured content that is
--          not valid JSON, …
--
-- Locking order, everywhere: the conversation row first (it also hands out
-- seq), then prompts, blocks and tool calls. claim_prompt and heartbeat lock
-- only a prompt row and never wait (SKIP LOCKED / no event), so no cycle.

-- ---------------------------------------------------------------------------
-- JSON shapes. Event payloads and API responses use the proto3 JSON names of
-- the Connect API; these functions are the one place that builds them.

-- +goose StatementBegin
CREATE FUNCTION convo._ts(t timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;
-- +goose StatementEnd

-- _object drops the top-level keys of o whose value is JSON null, the way
-- proto3 JSON omits unset fields; nested values (tool inputs, model
-- configurations, metadata) are left exactly as they are.
-- +goose StatementBegin
CREATE FUNCTION convo._object(o jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}')
      FROM jsonb_each(o) e
     WHERE jsonb_typeof(e.value) <> 'null'
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION convo._conversation_json(c convo.conversations) RETURNS jsonb
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
CREATE FUNCTION convo._message_json(m convo.messages) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT convo._object(jsonb_build_object(
        'id', m.id,
        'conversationId', m.conversation_id,
        'role', m.role,
        'status', m.status,
        'promptId', (SELECT p.id FROM convo.prompts p WHERE p.message_id = m.id),
        'createdAt', convo._ts(m.created_at),
        'updatedAt', convo._ts(m.updated_at)))
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION convo._prompt_json(p convo.prompts) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT convo._object(jsonb_build_object(
        'id', p.id,
        'conversationId', p.conversation_id,
        'messageId', p.message_id,
        'status', p.status,
        'modelConfig', p.model_config,
        'error', p.error,
        'createdAt', convo._ts(p.created_at),
        'startedAt', convo._ts(p.started_at),
        'endedAt', convo._ts(p.ended_at)))
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION convo._tool_call_json(t convo.tool_calls) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT convo._object(jsonb_build_object(
        'id', t.id,
        'blockId', t.block_id,
        'name', t.name,
        'status', t.status,
        'input', t.input,
        'output', nullif(t.output, ''),
        'error', t.error,
        'startedAt', convo._ts(t.started_at),
        'endedAt', convo._ts(t.ended_at)))
$$;
-- +goose StatementEnd

-- ---------------------------------------------------------------------------
-- The event log.

-- _lock_conversation takes the conversation's row lock, which every writer of
-- the conversation holds until it commits. It raises CV001 for an unknown id.
-- +goose StatementBegin
CREATE FUNCTION convo._lock_conversation(p_conversation_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM convo.conversations WHERE id = p_conversation_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conversation % does not exist', p_conversation_id USING ERRCODE = 'CV001';
    END IF;
END;
$$;
-- +goose StatementEnd

-- _append_event appends one event with the conversation's next seq and
-- notifies "convo_events" with '<conversation id>:<seq>'. The caller must
-- already hold the conversation's lock (_lock_conversation), so that writers
-- of one conversation commit in seq order: a reader that has seen seq N
-- committed has seen every seq below it.
-- +goose StatementBegin
CREATE FUNCTION convo._append_event(
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

-- _block_text is the text of a block as its delta events tell it.
-- +goose StatementBegin
CREATE FUNCTION convo._block_text(p_block_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce(string_agg(e.payload->>'content', '' ORDER BY e.seq), '')
      FROM convo.events e
     WHERE e.block_id = p_block_id AND e.kind = 'blockDelta'
$$;
-- +goose StatementEnd

-- _tool_output is the output of a tool call as its progress events tell it.
-- +goose StatementBegin
CREATE FUNCTION convo._tool_output(p_tool_call_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce(string_agg(e.payload->>'output', '' ORDER BY e.seq), '')
      FROM convo.events e
     WHERE e.tool_call_id = p_tool_call_id AND e.kind = 'toolCallProgress'
$$;
-- +goose StatementEnd

-- _set_active_prompt points the conversation at its newest unfinished prompt
-- and, when that changed, appends conversationUpdated.
-- +goose StatementBegin
CREATE FUNCTION convo._refresh_active_prompt(p_conversation_id uuid) RETURNS void
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

-- _check_metadata raises CV003 unless metadata is NULL or a JSON object.
-- +goose StatementBegin
CREATE FUNCTION convo._check_metadata(p_metadata jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_metadata IS NOT NULL AND jsonb_typeof(p_metadata) <> 'object' THEN
        RAISE EXCEPTION 'metadata must be a JSON object, got %', jsonb_typeof(p_metadata)
            USING ERRCODE = 'CV003';
    END IF;
END;
$$;
-- +goose StatementEnd

-- _running_prompt locks the prompt's conversation and returns the prompt,
-- raising CV001 when it does not exist and CV002 unless it is running.
-- +goose StatementBegin
CREATE FUNCTION convo._running_prompt(p_prompt_id uuid, p_action text) RETURNS convo.prompts
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt convo.prompts;
BEGIN
    SELECT * INTO v_prompt FROM convo.prompts WHERE id = p_prompt_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: prompt % does not exist', p_action, p_prompt_id USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._lock_conversation(v_prompt.conversation_id);
    SELECT * INTO v_prompt FROM convo.prompts WHERE id = p_prompt_id;
    IF v_prompt.status = 'queued' THEN
        RAISE EXCEPTION '%: prompt % is queued, not running', p_action, p_prompt_id
            USING ERRCODE = 'CV002', HINT = 'call convo.start_prompt first';
    ELSIF v_prompt.status <> 'running' THEN
        RAISE EXCEPTION '%: prompt % is %, not running', p_action, p_prompt_id, v_prompt.status
            USING ERRCODE = 'CV002';
    END IF;
    RETURN v_prompt;
END;
$$;
-- +goose StatementEnd

-- _end_block materialises a streaming block's content and appends blockEnd.
-- +goose StatementBegin
CREATE FUNCTION convo._end_block(p_block convo.blocks, p_metadata jsonb, p_validate boolean) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_content text := convo._block_text(p_block.id);
    v_metadata jsonb := p_block.metadata || coalesce(p_metadata, '{}');
BEGIN
    IF p_validate AND p_block.block_type = 'structured' THEN
        BEGIN
            PERFORM v_content::jsonb;
        EXCEPTION WHEN invalid_text_representation THEN
            RAISE EXCEPTION 'end_block: structured block % does not hold valid JSON: %', p_block.id, SQLERRM
                USING ERRCODE = 'CV003';
        END;
    END IF;
    UPDATE convo.blocks
       SET status = 'completed', content = v_content, metadata = v_metadata, ended_at = now()
     WHERE id = p_block.id;
    PERFORM convo._append_event(p_block.conversation_id, 'blockEnd',
        jsonb_build_object('promptId', p_block.prompt_id, 'messageId', p_block.message_id,
                           'blockId', p_block.id, 'metadata', v_metadata),
        p_block.prompt_id, p_block.id);
END;
$$;
-- +goose StatementEnd

-- _end_tool_call materialises a tool call's output (plus a final chunk) and
-- appends toolCallCompleted or toolCallFailed.
-- +goose StatementBegin
CREATE FUNCTION convo._end_tool_call(p_tool_call_id uuid, p_output text, p_error text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_call convo.tool_calls;
BEGIN
    UPDATE convo.tool_calls
       SET status = CASE WHEN p_error IS NULL THEN 'completed' ELSE 'failed' END,
           output = convo._tool_output(id) || coalesce(p_output, ''),
           error = p_error,
           ended_at = now()
     WHERE id = p_tool_call_id
    RETURNING * INTO v_call;
    IF p_error IS NULL THEN
        PERFORM convo._append_event(v_call.conversation_id, 'toolCallCompleted',
            jsonb_build_object('toolCall', convo._tool_call_json(v_call)),
            v_call.prompt_id, v_call.block_id, v_call.id);
    ELSE
        PERFORM convo._append_event(v_call.conversation_id, 'toolCallFailed',
            jsonb_build_object('toolCall', convo._tool_call_json(v_call), 'error', p_error),
            v_call.prompt_id, v_call.block_id, v_call.id);
    END IF;
END;
$$;
-- +goose StatementEnd

-- _finish_prompt ends a queued or running prompt: it fails its open tool
-- calls, ends its open blocks, sets the prompt and its message to the final
-- status, and moves the conversation's active prompt on. The caller holds
-- the conversation lock.
-- +goose StatementBegin
CREATE FUNCTION convo._finish_prompt(p_prompt_id uuid, p_status text, p_error text) RETURNS convo.prompts
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt  convo.prompts;
    v_message convo.messages;
    v_block   convo.blocks;
    v_call_id uuid;
    v_kind    text;
BEGIN
    FOR v_call_id IN
        SELECT t.id FROM convo.tool_calls t
         WHERE t.prompt_id = p_prompt_id AND t.status IN ('started', 'running')
         ORDER BY t.started_at, t.id
    LOOP
        PERFORM convo._end_tool_call(v_call_id, NULL, 'prompt ' || p_status || ' before the tool call finished');
    END LOOP;
    FOR v_block IN
        SELECT * FROM convo.blocks b
         WHERE b.prompt_id = p_prompt_id AND b.status = 'streaming'
         ORDER BY b.position
    LOOP
        PERFORM convo._end_block(v_block, NULL, false);
    END LOOP;

    UPDATE convo.prompts
       SET status = p_status, error = p_error, ended_at = now(), lease_expires_at = NULL
     WHERE id = p_prompt_id
    RETURNING * INTO v_prompt;
    v_kind := CASE p_status WHEN 'completed' THEN 'promptCompleted'
                            WHEN 'failed' THEN 'promptFailed'
                            ELSE 'promptCancelled' END;
    PERFORM convo._append_event(v_prompt.conversation_id, v_kind,
        convo._object(jsonb_build_object('prompt', convo._prompt_json(v_prompt), 'error', p_error)),
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

-- ---------------------------------------------------------------------------
-- The queue.

-- expire_leases fails every running prompt whose lease expired: its worker
-- stopped heartbeating, and since part of its reply may already have been
-- streamed to readers, running it again would show that text twice. A
-- claimed prompt that was never started simply becomes claimable again (see
-- claim_prompt). Returns how many prompts it failed. claim_prompt calls it,
-- and so does the server periodically.
-- +goose StatementBegin
CREATE FUNCTION convo.expire_leases() RETURNS integer
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
        PERFORM convo._lock_conversation(v_candidate.conversation_id);
        -- Recheck under the lock: the worker may have finished or heartbeated.
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

-- claim_prompt hands the oldest claimable prompt to worker for lease_seconds:
-- a queued prompt nobody holds, or one whose holder's lease expired before
-- it started it. It returns no row when the queue is empty.
-- +goose StatementBegin
CREATE FUNCTION convo.claim_prompt(worker text, lease_seconds integer)
RETURNS TABLE (prompt_id uuid, conversation_id uuid, message_id uuid, model_config jsonb, attempts integer)
LANGUAGE plpgsql AS $$
BEGIN
    IF worker IS NULL OR worker = '' THEN
        RAISE EXCEPTION 'claim_prompt: worker must be a non-empty name' USING ERRCODE = 'CV003';
    END IF;
    IF lease_seconds IS NULL OR lease_seconds < 1 OR lease_seconds > 3600 THEN
        RAISE EXCEPTION 'claim_prompt: lease_seconds must be between 1 and 3600, got %', lease_seconds
            USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo.expire_leases();
    RETURN QUERY
    UPDATE convo.prompts p
       SET worker = claim_prompt.worker,
           lease_seconds = claim_prompt.lease_seconds,
           lease_expires_at = now() + make_interval(secs => claim_prompt.lease_seconds),
           attempts = p.attempts + 1
     WHERE p.id = (SELECT q.id FROM convo.prompts q
                    WHERE q.status = 'queued'
                      AND (q.lease_expires_at IS NULL OR q.lease_expires_at < now())
                    ORDER BY q.created_at, q.id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED)
    RETURNING p.id, p.conversation_id, p.message_id, p.model_config, p.attempts;
END;
$$;
-- +goose StatementEnd

-- heartbeat extends worker's lease on a prompt it holds. It returns false
-- when the worker should stop: the prompt was cancelled, failed (for example
-- by lease expiry), completed, or is now held by another worker.
-- +goose StatementBegin
CREATE FUNCTION convo.heartbeat(prompt_id uuid, worker text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE convo.prompts p
       SET lease_expires_at = now() + make_interval(secs => coalesce(p.lease_seconds, 30))
     WHERE p.id = heartbeat.prompt_id
       AND p.worker = heartbeat.worker
       AND p.status IN ('queued', 'running');
    IF FOUND THEN
        RETURN true;
    END IF;
    PERFORM 1 FROM convo.prompts p WHERE p.id = heartbeat.prompt_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'heartbeat: prompt % does not exist', heartbeat.prompt_id USING ERRCODE = 'CV001';
    END IF;
    RETURN false;
END;
$$;
-- +goose StatementEnd

-- ---------------------------------------------------------------------------
-- Writing a reply.

-- start_prompt moves a queued prompt to running and its message to
-- processing. Events: promptStarted, messageUpdated.
-- +goose StatementBegin
CREATE FUNCTION convo.start_prompt(prompt_id uuid) RETURNS void
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
       SET status = 'running', started_at = now(),
           lease_expires_at = now() + make_interval(secs => coalesce(p.lease_seconds, 30))
     WHERE p.id = start_prompt.prompt_id AND p.status = 'queued'
    RETURNING * INTO v_prompt;
    IF NOT FOUND THEN
        SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = start_prompt.prompt_id;
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

-- start_block opens a block of block_type at the end of the prompt's
-- message and returns its id. Event: blockStart.
-- +goose StatementBegin
CREATE FUNCTION convo.start_block(prompt_id uuid, block_type text, metadata jsonb DEFAULT '{}')
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt convo.prompts;
    v_block  convo.blocks;
BEGIN
    IF block_type IS NULL OR block_type !~ '^[a-z][a-z0-9_]{0,63}$' THEN
        RAISE EXCEPTION 'start_block: block_type % is not a lower_snake name of at most 64 characters', block_type
            USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._check_metadata(metadata);
    v_prompt := convo._running_prompt(start_block.prompt_id, 'start_block');
    INSERT INTO convo.blocks (conversation_id, message_id, prompt_id, position, block_type, status, metadata)
    VALUES (v_prompt.conversation_id, v_prompt.message_id, v_prompt.id,
            (SELECT coalesce(max(b.position) + 1, 0) FROM convo.blocks b WHERE b.message_id = v_prompt.message_id),
            start_block.block_type, 'streaming', coalesce(start_block.metadata, '{}'))
    RETURNING * INTO v_block;
    PERFORM convo._append_event(v_prompt.conversation_id, 'blockStart',
        jsonb_build_object('promptId', v_prompt.id, 'messageId', v_prompt.message_id,
                           'blockId', v_block.id, 'blockType', v_block.block_type,
                           'metadata', v_block.metadata, 'position', v_block.position),
        v_prompt.id, v_block.id);
    RETURN v_block.id;
END;
$$;
-- +goose StatementEnd

-- _streaming_block locks the block's conversation and returns the block,
-- raising unless it exists, is streaming and its prompt is running.
-- +goose StatementBegin
CREATE FUNCTION convo._streaming_block(p_block_id uuid, p_action text) RETURNS convo.blocks
LANGUAGE plpgsql AS $$
DECLARE
    v_block convo.blocks;
BEGIN
    SELECT * INTO v_block FROM convo.blocks WHERE id = p_block_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: block % does not exist', p_action, p_block_id USING ERRCODE = 'CV001';
    END IF;
    IF v_block.prompt_id IS NULL THEN
        RAISE EXCEPTION '%: block % belongs to a user message and cannot be written', p_action, p_block_id
            USING ERRCODE = 'CV002';
    END IF;
    PERFORM convo._running_prompt(v_block.prompt_id, p_action);
    SELECT * INTO v_block FROM convo.blocks WHERE id = p_block_id;
    IF v_block.status <> 'streaming' THEN
        RAISE EXCEPTION '%: block % has ended', p_action, p_block_id USING ERRCODE = 'CV002';
    END IF;
    RETURN v_block;
END;
$$;
-- +goose StatementEnd

-- append_block appends delta to a streaming block. The cost does not depend
-- on how much the block already holds: the delta is one new event row. An
-- empty delta writes no event. Event: blockDelta.
--
-- delta_seq makes retries safe: a worker numbers its appends to a block 1,
-- 2, 3 … and, when a call's reply is lost (the connection dropped after the
-- commit), calls again with the same number. A delta_seq already applied is
-- a no-op; one that skips a number raises CV002. Without delta_seq every
-- call appends.
-- +goose StatementBegin
CREATE FUNCTION convo.append_block(block_id uuid, delta text, delta_seq integer DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_block convo.blocks;
BEGIN
    v_block := convo._streaming_block(append_block.block_id, 'append_block');
    IF delta_seq IS NOT NULL THEN
        IF delta_seq <= v_block.delta_count THEN
            RETURN; -- a retry of an append that was applied
        END IF;
        IF delta_seq <> v_block.delta_count + 1 THEN
            RAISE EXCEPTION 'append_block: delta_seq % skips ahead: block % has % deltas, the next is %',
                delta_seq, v_block.id, v_block.delta_count, v_block.delta_count + 1
                USING ERRCODE = 'CV002';
        END IF;
    END IF;
    UPDATE convo.blocks b SET delta_count = b.delta_count + 1 WHERE b.id = v_block.id;
    IF delta IS NULL OR delta = '' THEN
        RETURN;
    END IF;
    PERFORM convo._append_event(v_block.conversation_id, 'blockDelta',
        jsonb_build_object('promptId', v_block.prompt_id, 'messageId', v_block.message_id,
                           'blockId', v_block.id, 'content', delta),
        v_block.prompt_id, v_block.id);
END;
$$;
-- +goose StatementEnd

-- end_block ends a streaming block, merging metadata (a JSON object) into
-- the block's. A structured block must then hold valid JSON (CV003
-- otherwise). Event: blockEnd.
-- +goose StatementBegin
CREATE FUNCTION convo.end_block(block_id uuid, metadata jsonb DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM convo._check_metadata(metadata);
    PERFORM convo._end_block(convo._streaming_block(end_block.block_id, 'end_block'), end_block.metadata, true);
END;
$$;
-- +goose StatementEnd

-- start_tool_call records a call of the tool name with input on a tool_use
-- block (streaming or ended) of a running prompt, and returns its id. One
-- block holds at most one tool call. Event: toolCallStarted.
-- +goose StatementBegin
CREATE FUNCTION convo.start_tool_call(block_id uuid, name text, input jsonb) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_block convo.blocks;
    v_call  convo.tool_calls;
BEGIN
    IF name IS NULL OR name = '' THEN
        RAISE EXCEPTION 'start_tool_call: name must not be empty' USING ERRCODE = 'CV003';
    END IF;
    IF input IS NULL THEN
        RAISE EXCEPTION 'start_tool_call: input must be JSON, not NULL' USING ERRCODE = 'CV003';
    END IF;
    SELECT * INTO v_block FROM convo.blocks b WHERE b.id = start_tool_call.block_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'start_tool_call: block % does not exist', start_tool_call.block_id USING ERRCODE = 'CV001';
    END IF;
    IF v_block.prompt_id IS NULL THEN
        RAISE EXCEPTION 'start_tool_call: block % belongs to a user message', v_block.id USING ERRCODE = 'CV002';
    END IF;
    PERFORM convo._running_prompt(v_block.prompt_id, 'start_tool_call');
    IF v_block.block_type <> 'tool_use' THEN
        RAISE EXCEPTION 'start_tool_call: block % is a % block, not tool_use', v_block.id, v_block.block_type
            USING ERRCODE = 'CV002';
    END IF;
    IF EXISTS (SELECT 1 FROM convo.tool_calls t WHERE t.block_id = v_block.id) THEN
        RAISE EXCEPTION 'start_tool_call: block % already has a tool call', v_block.id USING ERRCODE = 'CV002';
    END IF;
    INSERT INTO convo.tool_calls (conversation_id, block_id, prompt_id, name, input, status)
    VALUES (v_block.conversation_id, v_block.id, v_block.prompt_id, start_tool_call.name, start_tool_call.input, 'started')
    RETURNING * INTO v_call;
    PERFORM convo._append_event(v_block.conversation_id, 'toolCallStarted',
        jsonb_build_object('toolCall', convo._tool_call_json(v_call), 'input', v_call.input),
        v_call.prompt_id, v_call.block_id, v_call.id);
    RETURN v_call.id;
END;
$$;
-- +goose StatementEnd

-- _open_tool_call locks the call's conversation and returns the call,
-- raising unless it exists, is started or running, and its prompt runs.
-- +goose StatementBegin
CREATE FUNCTION convo._open_tool_call(p_tool_call_id uuid, p_action text) RETURNS convo.tool_calls
LANGUAGE plpgsql AS $$
DECLARE
    v_call convo.tool_calls;
BEGIN
    SELECT * INTO v_call FROM convo.tool_calls WHERE id = p_tool_call_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: tool call % does not exist', p_action, p_tool_call_id USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._running_prompt(v_call.prompt_id, p_action);
    SELECT * INTO v_call FROM convo.tool_calls WHERE id = p_tool_call_id;
    IF v_call.status NOT IN ('started', 'running') THEN
        RAISE EXCEPTION '%: tool call % has already %', p_action, p_tool_call_id, v_call.status
            USING ERRCODE = 'CV002';
    END IF;
    RETURN v_call;
END;
$$;
-- +goose StatementEnd

-- tool_call_progress appends output to a started or running tool call and
-- marks it running. Like append_block, its cost does not grow with the
-- output so far; empty output is a no-op. Event: toolCallProgress.
-- +goose StatementBegin
CREATE FUNCTION convo.tool_call_progress(tool_call_id uuid, output text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_call convo.tool_calls;
BEGIN
    v_call := convo._open_tool_call(tool_call_progress.tool_call_id, 'tool_call_progress');
    IF output IS NULL OR output = '' THEN
        RETURN;
    END IF;
    IF v_call.status = 'started' THEN
        UPDATE convo.tool_calls t SET status = 'running' WHERE t.id = v_call.id;
    END IF;
    PERFORM convo._append_event(v_call.conversation_id, 'toolCallProgress',
        jsonb_build_object('toolCallId', v_call.id, 'blockId', v_call.block_id, 'output', output),
        v_call.prompt_id, v_call.block_id, v_call.id);
END;
$$;
-- +goose StatementEnd

-- complete_tool_call completes a tool call; output, when given, is appended
-- to what progress wrote. Event: toolCallCompleted, whose toolCall holds
-- the whole output.
-- +goose StatementBegin
CREATE FUNCTION convo.complete_tool_call(tool_call_id uuid, output text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM convo._open_tool_call(complete_tool_call.tool_call_id, 'complete_tool_call');
    PERFORM convo._end_tool_call(complete_tool_call.tool_call_id, complete_tool_call.output, NULL);
END;
$$;
-- +goose StatementEnd

-- fail_tool_call fails a tool call with a non-empty error. Event:
-- toolCallFailed.
-- +goose StatementBegin
CREATE FUNCTION convo.fail_tool_call(tool_call_id uuid, error text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF error IS NULL OR error = '' THEN
        RAISE EXCEPTION 'fail_tool_call: error must not be empty' USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._open_tool_call(fail_tool_call.tool_call_id, 'fail_tool_call');
    PERFORM convo._end_tool_call(fail_tool_call.tool_call_id, NULL, fail_tool_call.error);
END;
$$;
-- +goose StatementEnd

-- complete_prompt completes a running prompt and its message. Tool calls
-- still open are failed and blocks still open are ended first. Events:
-- (toolCallFailed …, blockEnd …), promptCompleted, messageUpdated, and
-- conversationUpdated when the active prompt moves on (docs/events.md).
-- +goose StatementBegin
CREATE FUNCTION convo.complete_prompt(prompt_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM convo._running_prompt(complete_prompt.prompt_id, 'complete_prompt');
    PERFORM convo._finish_prompt(complete_prompt.prompt_id, 'completed', NULL);
END;
$$;
-- +goose StatementEnd

-- fail_prompt fails a queued or running prompt and its message with a
-- non-empty error; open blocks and tool calls end as in complete_prompt.
-- Events: (…), promptFailed, messageUpdated.
-- +goose StatementBegin
CREATE FUNCTION convo.fail_prompt(prompt_id uuid, error text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt convo.prompts;
BEGIN
    IF error IS NULL OR error = '' THEN
        RAISE EXCEPTION 'fail_prompt: error must not be empty' USING ERRCODE = 'CV003';
    END IF;
    SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = fail_prompt.prompt_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fail_prompt: prompt % does not exist', fail_prompt.prompt_id USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._lock_conversation(v_prompt.conversation_id);
    SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = fail_prompt.prompt_id;
    IF v_prompt.status NOT IN ('queued', 'running') THEN
        RAISE EXCEPTION 'fail_prompt: prompt % is already %', v_prompt.id, v_prompt.status USING ERRCODE = 'CV002';
    END IF;
    PERFORM convo._finish_prompt(v_prompt.id, 'failed', fail_prompt.error);
END;
$$;
-- +goose StatementEnd

-- cancel_prompt cancels a queued or running prompt and its message; the
-- partial reply stays, open blocks end and open tool calls fail. Cancelling
-- a cancelled prompt is harmless and returns false; cancelling a completed
-- or failed one raises CV002. It notifies "convo_prompts" with
-- 'cancelled:<prompt id>' so the worker stops at once (heartbeat also
-- returns false from now on). Events: (…), promptCancelled, messageUpdated.
-- +goose StatementBegin
CREATE FUNCTION convo.cancel_prompt(prompt_id uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt convo.prompts;
BEGIN
    SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = cancel_prompt.prompt_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cancel_prompt: prompt % does not exist', cancel_prompt.prompt_id USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._lock_conversation(v_prompt.conversation_id);
    SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = cancel_prompt.prompt_id;
    IF v_prompt.status = 'cancelled' THEN
        RETURN false;
    END IF;
    IF v_prompt.status NOT IN ('queued', 'running') THEN
        RAISE EXCEPTION 'cancel_prompt: prompt % is already %', v_prompt.id, v_prompt.status USING ERRCODE = 'CV002';
    END IF;
    PERFORM convo._finish_prompt(v_prompt.id, 'cancelled', NULL);
    PERFORM pg_notify('convo_prompts', 'cancelled:' || v_prompt.id::text);
    RETURN true;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION convo.cancel_prompt(uuid);
DROP FUNCTION convo.fail_prompt(uuid, text);
DROP FUNCTION convo.complete_prompt(uuid);
DROP FUNCTION convo.fail_tool_call(uuid, text);
DROP FUNCTION convo.complete_tool_call(uuid, text);
DROP FUNCTION convo.tool_call_progress(uuid, text);
DROP FUNCTION convo._open_tool_call(uuid, text);
DROP FUNCTION convo.start_tool_call(uuid, text, jsonb);
DROP FUNCTION convo.end_block(uuid, jsonb);
DROP FUNCTION convo.append_block(uuid, text, integer);
DROP FUNCTION convo._streaming_block(uuid, text);
DROP FUNCTION convo.start_block(uuid, text, jsonb);
DROP FUNCTION convo.start_prompt(uuid);
DROP FUNCTION convo.heartbeat(uuid, text);
DROP FUNCTION convo.claim_prompt(text, integer);
DROP FUNCTION convo.expire_leases();
DROP FUNCTION convo._finish_prompt(uuid, text, text);
DROP FUNCTION convo._end_tool_call(uuid, text, text);
DROP FUNCTION convo._end_block(convo.blocks, jsonb, boolean);
DROP FUNCTION convo._running_prompt(uuid, text);
DROP FUNCTION convo._check_metadata(jsonb);
DROP FUNCTION convo._refresh_active_prompt(uuid);
DROP FUNCTION convo._tool_output(uuid);
DROP FUNCTION convo._block_text(uuid);
DROP FUNCTION convo._append_event(uuid, text, jsonb, uuid, uuid, uuid);
DROP FUNCTION convo._lock_conversation(uuid);
DROP FUNCTION convo._tool_call_json(convo.tool_calls);
DROP FUNCTION convo._prompt_json(convo.prompts);
DROP FUNCTION convo._message_json(convo.messages);
DROP FUNCTION convo._conversation_json(convo.conversations);
DROP FUNCTION convo._object(jsonb);
DROP FUNCTION convo._ts(timestamptz);
