-- The SQL worker API (docs/worker-api.md is the reference), pauses: a tool
-- call asks a person (request_input) and its prompt waits for the answer
-- holding no worker (wait_prompt); the answer (answer_input,
-- client_inputs.sql) queues it again, and a worker claims and starts it as
-- usual and reads the answers (prompt_inputs, worker_reads.sql).
-- docs/worker-api.md, "Pauses", is the reference.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), in the order of
-- db.FunctionFiles, so a change to a function is an edit here. See
-- db/README.md.

-- _input_event appends an event of an input request (the row's prompt,
-- block and tool call ids set) whose payload also carries the prompt's
-- assistant message as _message_json makes it (key "message"), so that a
-- stream that does not deliver the kind to a client can send that
-- message as a messageUpdated of the same seq instead.
CREATE OR REPLACE FUNCTION convo._input_event(p_request convo.input_requests, p_kind text, p_payload jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_block_id uuid;
    v_message  convo.messages;
BEGIN
    SELECT t.block_id INTO v_block_id FROM convo.tool_calls t WHERE t.id = p_request.tool_call_id;
    SELECT m.* INTO v_message FROM convo.prompts p JOIN convo.messages m ON m.id = p.message_id
     WHERE p.id = p_request.prompt_id;
    PERFORM convo._append_event(p_request.conversation_id, p_kind,
        p_payload || jsonb_build_object('message', convo._message_json(v_message)),
        p_request.prompt_id, v_block_id, p_request.tool_call_id);
END;
$$;

-- _input_answered appends inputAnswered for a request that stopped being
-- pending: answered, expired or cancelled.
CREATE OR REPLACE FUNCTION convo._input_answered(p_request convo.input_requests) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM convo._input_event(p_request, 'inputAnswered', convo._object(jsonb_build_object(
        'toolCallId', p_request.tool_call_id,
        'promptId', p_request.prompt_id,
        'status', p_request.status,
        'answer', p_request.answer,
        'answeredAt', convo._ts(p_request.answered_at))));
END;
$$;

-- _resume_prompt makes a waiting prompt with no pending request left
-- claimable again (trigger prompts_claimable_resume puts its owner in
-- convo.owner_queue) and notifies "convo_prompts" with 'queued:<prompt
-- id>', as a queued prompt does. It returns whether it did. The caller
-- holds the conversation lock.
CREATE OR REPLACE FUNCTION convo._resume_prompt(p_prompt_id uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE convo.prompts p SET waiting = false
     WHERE p.id = p_prompt_id AND p.waiting
       AND NOT EXISTS (SELECT 1 FROM convo.input_requests r WHERE r.prompt_id = p.id AND r.status = 'pending');
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM convo._notify_prompt('queued', p_prompt_id);
    RETURN true;
END;
$$;

-- _check_input_request raises CV003 unless kind is approval, client_tool
-- or question and request is a JSON object of its shape: approval {} or
-- {"message": text}; client_tool {} or {"outputSchema": object};
-- question {"question": text, "choices": [text, …]} (choices optional:
-- one or more distinct texts). Every text must show something
-- (_has_visible); a key the kind does not take is refused.
CREATE OR REPLACE FUNCTION convo._check_input_request(p_kind text, p_request jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_keys    text[] := CASE p_kind WHEN 'approval' THEN ARRAY['message']
                                    WHEN 'client_tool' THEN ARRAY['outputSchema']
                                    WHEN 'question' THEN ARRAY['question', 'choices'] END;
    v_key     text;
    v_choice  jsonb;
BEGIN
    IF v_keys IS NULL THEN
        RAISE EXCEPTION 'request_input: kind must be approval, client_tool or question, got %', coalesce(p_kind, 'NULL')
            USING ERRCODE = 'CV003';
    END IF;
    IF jsonb_typeof(p_request) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'request_input: request must be a JSON object, got %', coalesce(jsonb_typeof(p_request), 'NULL')
            USING ERRCODE = 'CV003';
    END IF;
    SELECT k INTO v_key FROM jsonb_object_keys(p_request) k WHERE k <> ALL (v_keys) ORDER BY k LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'request_input: a request of kind % takes %, not "%"', p_kind,
            coalesce(nullif(array_to_string(v_keys, ', '), ''), 'no key'), v_key USING ERRCODE = 'CV003';
    END IF;
    IF p_kind = 'approval' AND p_request ? 'message'
       AND (jsonb_typeof(p_request->'message') <> 'string' OR NOT convo._has_visible(p_request->>'message')) THEN
        RAISE EXCEPTION 'request_input: request.message must be a text that shows something' USING ERRCODE = 'CV003';
    END IF;
    IF p_kind = 'client_tool' AND p_request ? 'outputSchema' AND jsonb_typeof(p_request->'outputSchema') <> 'object' THEN
        RAISE EXCEPTION 'request_input: request.outputSchema must be a JSON object (a JSON Schema), got %',
            jsonb_typeof(p_request->'outputSchema') USING ERRCODE = 'CV003';
    END IF;
    -- The bounds of a declared schema SQL can check cheaply (the Go
    -- answer path applies the whole declaration budget, internal/jsonschema
    -- Declare: MaxBytes, MaxDepth).
    IF p_kind = 'client_tool' AND p_request ? 'outputSchema' THEN
        IF octet_length((p_request->'outputSchema')::text) > 65536 THEN
            RAISE EXCEPTION 'request_input: request.outputSchema is over the schema size limit: % bytes, at most 65536',
                octet_length((p_request->'outputSchema')::text) USING ERRCODE = 'CV003';
        END IF;
        IF jsonb_path_exists(p_request->'outputSchema', 'strict $.**{32 to last} ? (@.type() == "object" || @.type() == "array")') THEN
            RAISE EXCEPTION 'request_input: request.outputSchema is over the schema depth limit: nested deeper than 32 levels'
                USING ERRCODE = 'CV003';
        END IF;
    END IF;
    IF p_kind = 'question' THEN
        IF jsonb_typeof(p_request->'question') IS DISTINCT FROM 'string' OR NOT convo._has_visible(p_request->>'question') THEN
            RAISE EXCEPTION 'request_input: request.question must be a text that shows something' USING ERRCODE = 'CV003';
        END IF;
        IF p_request ? 'choices' THEN
            IF jsonb_typeof(p_request->'choices') <> 'array' OR jsonb_array_length(p_request->'choices') = 0 THEN
                RAISE EXCEPTION 'request_input: request.choices must be a non-empty JSON array of texts' USING ERRCODE = 'CV003';
            END IF;
            FOR v_choice IN SELECT c FROM jsonb_array_elements(p_request->'choices') c LOOP
                IF jsonb_typeof(v_choice) <> 'string' OR NOT convo._has_visible(v_choice #>> '{}') THEN
                    RAISE EXCEPTION 'request_input: request.choices must be texts that show something, got %', v_choice
                        USING ERRCODE = 'CV003';
                END IF;
            END LOOP;
            IF (SELECT count(DISTINCT c) FROM jsonb_array_elements(p_request->'choices') c)
               <> jsonb_array_length(p_request->'choices') THEN
                RAISE EXCEPTION 'request_input: request.choices must be distinct' USING ERRCODE = 'CV003';
            END IF;
        END IF;
    END IF;
END;
$$;

-- _request_input is request_input (write_batch calls it too).
CREATE OR REPLACE FUNCTION convo._request_input(p_tool_call_id uuid, p_kind text, p_request jsonb,
                                                p_expires_at timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_call    convo.tool_calls;
    v_request convo.input_requests;
BEGIN
    -- The rule for every JSON value first (its depth check also keeps
    -- the schema's own bounds below from meeting a 12,000-deep value).
    PERFORM convo._json_check(p_request, 'request_input: request');
    PERFORM convo._check_input_request(p_kind, p_request);
    IF p_expires_at IS NOT NULL AND p_expires_at <= now() THEN
        RAISE EXCEPTION 'request_input: expires_at must be in the future, got %', p_expires_at USING ERRCODE = 'CV003';
    END IF;
    v_call := convo._open_tool_call(p_tool_call_id, 'request_input');
    SELECT * INTO v_request FROM convo.input_requests r WHERE r.tool_call_id = v_call.id;
    IF FOUND THEN
        RAISE EXCEPTION 'request_input: tool call % already has an input request (%, %)', v_call.id,
            v_request.kind, v_request.status USING ERRCODE = 'CV002';
    END IF;
    IF v_call.status <> 'started' THEN
        RAISE EXCEPTION 'request_input: tool call % is %: ask before the tool writes output', v_call.id, v_call.status
            USING ERRCODE = 'CV002';
    END IF;
    INSERT INTO convo.input_requests (tool_call_id, conversation_id, prompt_id, kind, request, expires_at)
    VALUES (v_call.id, v_call.conversation_id, v_call.prompt_id, p_kind, p_request, p_expires_at)
    RETURNING * INTO v_request;
    PERFORM convo._input_event(v_request, 'inputRequested',
        jsonb_build_object('inputRequest', convo._input_request_json(v_request)));
END;
$$;

-- request_input asks a person for input on a started tool call (one that
-- wrote no output yet) of a running prompt: kind 'approval' (request {} or
-- {"message": text}), 'client_tool' (the client runs the tool: {} or
-- {"outputSchema": object}) or 'question' ({"question": text, "choices":
-- [text, …]}, choices optional). At most one request per tool call. A
-- request with expires_at expires then (expire_leases). The call stays
-- started while the request is pending; the worker then calls
-- wait_prompt. CV003 for a bad kind, request or expires_at (in the past);
-- CV001 for an unknown tool call; CV002 unless the call is started and
-- its prompt running, or when it has a request already. Event:
-- inputRequested.
CREATE OR REPLACE FUNCTION convo.request_input(tool_call_id uuid, kind text, request jsonb DEFAULT '{}',
                                               expires_at timestamptz DEFAULT NULL) RETURNS void
LANGUAGE sql AS $$
    SELECT convo._request_input(request_input.tool_call_id, request_input.kind, request_input.request,
                                request_input.expires_at)
$$;

-- wait_prompt parks the running prompt that worker holds until every input
-- request of its open tool calls is answered: the prompt goes back to
-- queued with waiting true, its worker and lease cleared (heartbeat
-- returns false from now on), and attempts starts again from 0 (the claim
-- that resumes it is the first of the new run). It is not claimable until
-- the last request is answered or expires. It returns true when it parked
-- the prompt, and false, changing nothing, when every request of its
-- open tool calls was answered already (a fast answer): the worker reads
-- the answers (prompt_inputs) and goes on. CV002 unless the prompt is
-- running and held by worker, when a block of it still streams (end it
-- first), or when no open tool call of it has an input request. Event:
-- promptWaiting.
CREATE OR REPLACE FUNCTION convo.wait_prompt(prompt_id uuid, worker text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt  convo.prompts;
    v_message convo.messages;
    v_block   uuid;
    v_pending uuid[];
    v_open    integer;
BEGIN
    v_prompt := convo._running_prompt(wait_prompt.prompt_id, 'wait_prompt');
    IF v_prompt.worker IS DISTINCT FROM wait_prompt.worker THEN
        RAISE EXCEPTION 'wait_prompt: prompt % is held by %, not by %', v_prompt.id,
            coalesce(v_prompt.worker, 'no worker'), coalesce(wait_prompt.worker, 'NULL') USING ERRCODE = 'CV002';
    END IF;
    SELECT b.id INTO v_block FROM convo.blocks b
     WHERE b.prompt_id = v_prompt.id AND b.status = 'streaming'
     ORDER BY b.position LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'wait_prompt: block % of prompt % is still streaming: end it first', v_block, v_prompt.id
            USING ERRCODE = 'CV002';
    END IF;
    SELECT array_agg(r.tool_call_id ORDER BY t.started_at, t.id) FILTER (WHERE r.status = 'pending'), count(*)
      INTO v_pending, v_open
      FROM convo.input_requests r
      JOIN convo.tool_calls t ON t.id = r.tool_call_id
     WHERE r.prompt_id = v_prompt.id AND t.status IN ('started', 'running');
    IF v_open = 0 THEN
        RAISE EXCEPTION 'wait_prompt: prompt % has no input request to wait for', v_prompt.id
            USING ERRCODE = 'CV002', HINT = 'call convo.request_input on a started tool call first';
    END IF;
    IF v_pending IS NULL THEN
        RETURN false;
    END IF;
    UPDATE convo.prompts p
       SET status = 'queued', waiting = true, worker = NULL, lease_seconds = NULL, lease_expires_at = NULL,
           attempts = 0
     WHERE p.id = v_prompt.id
    RETURNING * INTO v_prompt;
    SELECT * INTO v_message FROM convo.messages m WHERE m.id = v_prompt.message_id;
    PERFORM convo._append_event(v_prompt.conversation_id, 'promptWaiting',
        jsonb_build_object('prompt', convo._prompt_json(v_prompt), 'toolCallIds', to_jsonb(v_pending),
                           'message', convo._message_json(v_message)),
        v_prompt.id);
    RETURN true;
END;
$$;
