-- The SQL worker API (docs/worker-api.md is the reference): how a prompt
-- ends (complete_prompt, fail_prompt, and the token usage a worker reports
-- with it), and the helpers every writer of a prompt shares: the checks of
-- a running prompt, ending its blocks and tool calls, and _finish_prompt,
-- which cancel_prompt (client_replies.sql) and expire_leases
-- (worker_claims.sql) call too.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), in the order of
-- db.FunctionFiles, so a change to a function is an edit here. See
-- db/README.md.

-- _refresh_active_prompt points the conversation at its newest unfinished
-- prompt that is not awaiting its turn (a queued send's reply is not the
-- active one before its turn; with only those left, the newest of them)
-- and, when that changed, appends conversationUpdated.
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
                     ORDER BY p.awaiting_turn, p.created_at DESC, p.id DESC LIMIT 1) AS id) a
     WHERE c.id = p_conversation_id
       AND c.active_prompt_id IS DISTINCT FROM a.id
    RETURNING c.* INTO v_conv;
    IF FOUND THEN
        PERFORM convo._append_event(p_conversation_id, 'conversationUpdated',
            jsonb_build_object('conversation', convo._conversation_json(v_conv)));
    END IF;
END;
$$;

-- _check_metadata raises CV003 unless metadata is NULL or a JSON object.
CREATE OR REPLACE FUNCTION convo._check_metadata(p_metadata jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_metadata IS NOT NULL AND jsonb_typeof(p_metadata) <> 'object' THEN
        RAISE EXCEPTION 'metadata must be a JSON object, got %', jsonb_typeof(p_metadata)
            USING ERRCODE = 'CV003';
    END IF;
END;
$$;

-- _running_prompt locks the prompt's conversation and returns the prompt,
-- raising CV001 when it does not exist and CV002 unless it is running.
CREATE OR REPLACE FUNCTION convo._running_prompt(p_prompt_id uuid, p_action text) RETURNS convo.prompts
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

-- _end_block materialises a streaming block's content and appends blockEnd.
CREATE OR REPLACE FUNCTION convo._end_block(p_block convo.blocks, p_metadata jsonb, p_validate boolean) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_content text := convo._block_text(p_block.id);
    v_metadata jsonb := p_block.metadata || coalesce(p_metadata, '{}');
BEGIN
    IF p_validate AND p_block.block_type = 'structured' THEN
        BEGIN
            PERFORM convo._json_check(v_content::jsonb, 'end_block: content');
        EXCEPTION WHEN invalid_text_representation OR untranslatable_character OR numeric_value_out_of_range THEN
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

-- _end_tool_call materialises a tool call's output (plus a final chunk) and
-- appends toolCallCompleted or toolCallFailed. A request for input still
-- pending on the call is cancelled first (inputAnswered, status
-- cancelled): nobody can answer a call that ended.
CREATE OR REPLACE FUNCTION convo._end_tool_call(p_tool_call_id uuid, p_output text, p_error text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_call    convo.tool_calls;
    v_request convo.input_requests;
BEGIN
    UPDATE convo.input_requests r
       SET status = 'cancelled', answered_at = now()
     WHERE r.tool_call_id = p_tool_call_id AND r.status = 'pending'
    RETURNING * INTO v_request;
    IF FOUND THEN
        PERFORM convo._input_answered(v_request);
    END IF;
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

-- _fail_open_calls fails every open (started or running) tool call of the
-- prompt with p_error, as _end_tool_call fails one, whatever their number
-- in a few statements: the requests for input still pending on them are
-- cancelled, each call's output is what its toolCallProgress events hold
-- (read in one pass over the prompt's events from the first call's
-- block), and the events, call by call in the order the calls started
-- (inputAnswered, status cancelled, when a request was pending; then
-- toolCallFailed), are appended as one batch. The caller holds the
-- conversation's lock. (A loop of _end_tool_call read the prompt's later
-- events once per call and updated the conversation's row once per
-- event: cancelling a reply waiting on 1,000 inputs took seconds.)
CREATE OR REPLACE FUNCTION convo._fail_open_calls(p_prompt_id uuid, p_error text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_ids          uuid[];
    v_from         bigint;
    v_conversation uuid;
    v_message      jsonb;
    v_last         bigint;
BEGIN
    SELECT array_agg(t.id), min(coalesce(b.start_seq, 0)) INTO v_ids, v_from
      FROM convo.tool_calls t JOIN convo.blocks b ON b.id = t.block_id
     WHERE t.prompt_id = p_prompt_id AND t.status IN ('started', 'running');
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    -- The prompt's message as an input event carries it (_input_event):
    -- the same for every call, so built once.
    SELECT p.conversation_id, convo._message_json(m) INTO v_conversation, v_message
      FROM convo.prompts p JOIN convo.messages m ON m.id = p.message_id
     WHERE p.id = p_prompt_id;
    WITH cancelled AS (
        UPDATE convo.input_requests r
           SET status = 'cancelled', answered_at = now()
         WHERE r.tool_call_id = ANY (v_ids) AND r.status = 'pending'
        RETURNING r.*
    ), progress AS (
        SELECT e.tool_call_id, string_agg(e.payload->>'output', '' ORDER BY e.seq) AS output
          FROM convo.events e
         WHERE e.prompt_id = p_prompt_id AND e.seq > v_from
           AND e.kind = 'toolCallProgress' AND e.tool_call_id = ANY (v_ids)
         GROUP BY e.tool_call_id
    ), failed AS (
        UPDATE convo.tool_calls t
           SET status = 'failed', output = coalesce(o.output, ''), error = p_error, ended_at = now()
          FROM unnest(v_ids) AS i(id)
          LEFT JOIN progress o ON o.tool_call_id = i.id
         WHERE t.id = i.id
        RETURNING t
    ), batch AS (
        SELECT (f.t).started_at, (f.t).id, 0 AS nth, 'inputAnswered' AS kind, (f.t).block_id,
               -- _input_answered's payload; a cancelled request has no
               -- answer, and none of these is null.
               jsonb_build_object(
                   'toolCallId', c.tool_call_id,
                   'promptId', c.prompt_id,
                   'status', c.status,
                   'answeredAt', convo._ts(c.answered_at),
                   'message', v_message) AS payload
          FROM failed f JOIN cancelled c ON c.tool_call_id = (f.t).id
        UNION ALL
        SELECT (f.t).started_at, (f.t).id, 1, 'toolCallFailed', (f.t).block_id,
               jsonb_build_object('toolCall', convo._tool_call_json(f.t), 'error', p_error)
          FROM failed f
    )
    SELECT convo._append_events(v_conversation,
        array_agg(x.kind ORDER BY x.started_at, x.id, x.nth),
        array_agg(x.payload ORDER BY x.started_at, x.id, x.nth),
        array_agg(p_prompt_id ORDER BY x.started_at, x.id, x.nth),
        array_agg(x.block_id ORDER BY x.started_at, x.id, x.nth),
        array_agg(x.id ORDER BY x.started_at, x.id, x.nth))
      INTO v_last
      FROM batch x;
END;
$$;

-- _finish_prompt ends a queued (waiting or not) or running prompt: it
-- fails its open tool calls (cancelling their pending input requests,
-- _fail_open_calls), ends its open blocks, sets the prompt and its
-- message to the final status, and moves the conversation's active prompt
-- on. p_usage, the token usage the worker reported (_usage_json), goes in
-- the final event's payload as "usage" (none when NULL). The caller holds
-- the conversation lock.
--
-- A prompt that held the conversation's turn hands it on, in the same
-- transaction (_release_turn): every way a reply ends (complete_prompt,
-- fail_prompt, cancel_prompt, expire_leases, write_batch's ends) comes
-- here. A queued send's reply cancelled before its turn takes its user
-- message out of the queue when no other reply of it waits (messageUpdated,
-- queued unset).
CREATE OR REPLACE FUNCTION convo._finish_prompt(p_prompt_id uuid, p_status text, p_error text,
                                                p_usage jsonb DEFAULT NULL) RETURNS convo.prompts
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt  convo.prompts;
    v_message convo.messages;
    v_block   convo.blocks;
    v_kind    text;
    v_turn    boolean;
BEGIN
    SELECT p.awaiting_turn INTO v_turn FROM convo.prompts p WHERE p.id = p_prompt_id;
    PERFORM convo._fail_open_calls(p_prompt_id, 'prompt ' || p_status || ' before the tool call finished');
    FOR v_block IN
        SELECT * FROM convo.blocks b
         WHERE b.prompt_id = p_prompt_id AND b.status = 'streaming'
         ORDER BY b.position
    LOOP
        PERFORM convo._end_block(v_block, NULL, false);
    END LOOP;

    UPDATE convo.prompts
       SET status = p_status, error = p_error, ended_at = now(), lease_expires_at = NULL, waiting = false,
           awaiting_turn = false
     WHERE id = p_prompt_id
    RETURNING * INTO v_prompt;
    v_kind := CASE p_status WHEN 'completed' THEN 'promptCompleted'
                            WHEN 'failed' THEN 'promptFailed'
                            ELSE 'promptCancelled' END;
    PERFORM convo._append_event(v_prompt.conversation_id, v_kind,
        convo._object(jsonb_build_object('prompt', convo._prompt_json(v_prompt), 'error', p_error, 'usage', p_usage)),
        v_prompt.id);

    UPDATE convo.messages SET status = p_status, queued = false, updated_at = now()
     WHERE id = v_prompt.message_id
    RETURNING * INTO v_message;
    PERFORM convo._append_event(v_prompt.conversation_id, 'messageUpdated',
        jsonb_build_object('message', convo._message_json(v_message)), v_prompt.id);

    IF v_turn THEN
        UPDATE convo.messages u SET queued = false, updated_at = now()
         WHERE u.id = v_message.parent_id AND u.queued
           AND NOT EXISTS (SELECT 1 FROM convo.messages a JOIN convo.prompts p ON p.message_id = a.id
                            WHERE a.parent_id = u.id AND p.awaiting_turn)
        RETURNING * INTO v_message;
        IF FOUND THEN
            PERFORM convo._append_event(v_prompt.conversation_id, 'messageUpdated',
                jsonb_build_object('message', convo._message_json(v_message)));
        END IF;
    ELSE
        PERFORM convo._release_turn(v_prompt.conversation_id);
    END IF;
    PERFORM convo._refresh_active_prompt(v_prompt.conversation_id);
    RETURN v_prompt;
END;
$$;

-- _release_turn starts the next queued send of the conversation when no
-- prompt of it holds the turn (none queued or running that is not
-- awaiting its turn): the first send, in the conversation's order, whose
-- replies await their turn (a comparison's two replies go together). Its user message and replies
-- lose their queued mark (messageUpdated each: the user message, then the
-- replies in order), its prompts turn claimable (trigger
-- prompts_claimable_turn) and "convo_prompts" is notified with
-- 'queued:<prompt id>' for each. The caller holds the conversation lock,
-- so the turn passes in the transaction that ended the one before: no
-- claim sees two replies of the conversation in flight, nor none while
-- one waits. It costs one probe of an empty index when nothing waits.
CREATE OR REPLACE FUNCTION convo._release_turn(p_conversation_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_user    uuid;
    v_message convo.messages;
    v_prompt  uuid;
BEGIN
    -- Send order is the order of the replies' positions, given under the
    -- conversation's lock; not created_at, a transaction's start: sends
    -- written in one transaction (send_messages' group commit) share it,
    -- and a send that started first may have taken the lock second.
    SELECT m.parent_id INTO v_user
      FROM convo.prompts p JOIN convo.messages m ON m.id = p.message_id
     WHERE p.conversation_id = p_conversation_id AND p.awaiting_turn
     ORDER BY m.position
     LIMIT 1;
    IF NOT FOUND OR EXISTS (SELECT 1 FROM convo.prompts p
                             WHERE p.conversation_id = p_conversation_id AND p.status IN ('queued', 'running')
                               AND NOT p.awaiting_turn) THEN
        RETURN;
    END IF;
    UPDATE convo.messages m SET queued = false, updated_at = now()
     WHERE m.id = v_user AND m.queued
    RETURNING * INTO v_message;
    IF FOUND THEN
        PERFORM convo._append_event(p_conversation_id, 'messageUpdated',
            jsonb_build_object('message', convo._message_json(v_message)));
    END IF;
    FOR v_prompt IN
        SELECT p.id FROM convo.prompts p JOIN convo.messages a ON a.id = p.message_id
         WHERE a.parent_id = v_user AND p.awaiting_turn
         ORDER BY a.position
    LOOP
        UPDATE convo.prompts p SET awaiting_turn = false WHERE p.id = v_prompt;
        UPDATE convo.messages m SET queued = false, updated_at = now()
         WHERE m.id = (SELECT p.message_id FROM convo.prompts p WHERE p.id = v_prompt)
        RETURNING * INTO v_message;
        PERFORM convo._append_event(p_conversation_id, 'messageUpdated',
            jsonb_build_object('message', convo._message_json(v_message)), v_prompt);
        PERFORM convo._notify_prompt('queued', v_prompt);
    END LOOP;
END;
$$;

-- _usage_json checks the token usage a worker reports for a prompt and
-- returns it in its one shape: {"inputTokens", "outputTokens",
-- "cachedInputTokens", "reasoningTokens"}, whole numbers from 0 to
-- 2^53 - 1 (the last two 0 when not given; cached input tokens are some of
-- the input tokens, reasoning tokens some of the output tokens). NULL (SQL
-- or JSON): none reported.
-- Errors: CV003 naming what is wrong (not an object, an unknown field, a
-- missing or bad count, a part larger than its whole).
CREATE OR REPLACE FUNCTION convo._usage_json(p_usage jsonb, p_action text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_keys constant text[] := ARRAY['inputTokens', 'outputTokens', 'cachedInputTokens', 'reasoningTokens'];
    v_key  text;
    v_val  jsonb;
    v_out  jsonb := '{}';
BEGIN
    IF p_usage IS NULL OR jsonb_typeof(p_usage) = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_usage) <> 'object' THEN
        RAISE EXCEPTION '%: usage must be a JSON object {"inputTokens", "outputTokens", "cachedInputTokens", "reasoningTokens"}, got a %',
            p_action, jsonb_typeof(p_usage) USING ERRCODE = 'CV003';
    END IF;
    SELECT k INTO v_key FROM jsonb_object_keys(p_usage) k WHERE k <> ALL (v_keys) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%: usage.% is not a field of usage (inputTokens, outputTokens, cachedInputTokens, reasoningTokens)',
            p_action, left(v_key, 64) USING ERRCODE = 'CV003';
    END IF;
    FOREACH v_key IN ARRAY v_keys LOOP
        v_val := p_usage->v_key;
        IF v_val IS NULL AND v_key IN ('cachedInputTokens', 'reasoningTokens') THEN
            v_val := '0';
        END IF;
        IF v_val IS NULL OR jsonb_typeof(v_val) <> 'number' OR (v_val #>> '{}')::numeric < 0
           OR (v_val #>> '{}')::numeric <> trunc((v_val #>> '{}')::numeric)
           OR (v_val #>> '{}')::numeric > 9007199254740991 THEN
            RAISE EXCEPTION '%: usage.% must be a whole number from 0 to 2^53 - 1, got %', p_action, v_key,
                coalesce(left(v_val::text, 64), 'nothing') USING ERRCODE = 'CV003';
        END IF;
        v_out := v_out || jsonb_build_object(v_key, (v_val #>> '{}')::numeric::bigint);
    END LOOP;
    IF (v_out->>'cachedInputTokens')::bigint > (v_out->>'inputTokens')::bigint THEN
        RAISE EXCEPTION '%: usage.cachedInputTokens (%) is more than usage.inputTokens (%): cached tokens are some of the input tokens',
            p_action, v_out->>'cachedInputTokens', v_out->>'inputTokens' USING ERRCODE = 'CV003';
    END IF;
    IF (v_out->>'reasoningTokens')::bigint > (v_out->>'outputTokens')::bigint THEN
        RAISE EXCEPTION '%: usage.reasoningTokens (%) is more than usage.outputTokens (%): reasoning tokens are some of the output tokens',
            p_action, v_out->>'reasoningTokens', v_out->>'outputTokens' USING ERRCODE = 'CV003';
    END IF;
    RETURN v_out;
END;
$$;

-- complete_prompt completes a running prompt and its message. Tool calls
-- still open are failed and blocks still open are ended first. usage,
-- when given, is the tokens the reply took, as the model reported them
-- (_usage_json: {"inputTokens", "outputTokens", "cachedInputTokens",
-- "reasoningTokens"}); it is kept in the promptCompleted event, whose
-- payload is then the same on every read (OpenAI's Responses API shows
-- it as the Response's usage). Events: (toolCallFailed …, blockEnd …),
-- promptCompleted, messageUpdated, and conversationUpdated when the
-- active prompt moves on (docs/events.md).
-- Errors, changing nothing: those of _usage_json (CV003), then those of a
-- prompt that is not running.
CREATE OR REPLACE FUNCTION convo.complete_prompt(prompt_id uuid, usage jsonb DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_usage jsonb := convo._usage_json(complete_prompt.usage, 'complete_prompt');
BEGIN
    PERFORM convo._running_prompt(complete_prompt.prompt_id, 'complete_prompt');
    PERFORM convo._finish_prompt(complete_prompt.prompt_id, 'completed', NULL, v_usage);
END;
$$;

-- fail_prompt fails a queued or running prompt and its message with a
-- non-empty error; open blocks and tool calls end as in complete_prompt.
-- Events: (…), promptFailed, messageUpdated.
CREATE OR REPLACE FUNCTION convo.fail_prompt(prompt_id uuid, error text) RETURNS void
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
