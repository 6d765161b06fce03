-- The SQL worker API (docs/worker-api.md is the reference): the tool calls
-- of a tool_call block, started, reporting progress, and completed or
-- failed.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), in the order of
-- db.FunctionFiles, so a change to a function is an edit here. See
-- db/README.md.

-- _start_tool_call is start_tool_call with the call's id chosen by the
-- caller (write_batch).
CREATE OR REPLACE FUNCTION convo._start_tool_call(p_block_id uuid, p_tool_call_id uuid, p_name text, p_input jsonb)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_block convo.blocks;
    v_call  convo.tool_calls;
BEGIN
    IF p_name IS NULL OR p_name = '' THEN
        RAISE EXCEPTION 'start_tool_call: name must not be empty' USING ERRCODE = 'CV003';
    END IF;
    IF p_input IS NULL THEN
        RAISE EXCEPTION 'start_tool_call: input must be JSON, not NULL' USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._json_check(p_input, 'start_tool_call: input');
    SELECT * INTO v_block FROM convo.blocks b WHERE b.id = p_block_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'start_tool_call: block % does not exist', p_block_id USING ERRCODE = 'CV001';
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
    INSERT INTO convo.tool_calls (id, conversation_id, block_id, prompt_id, name, input, status)
    VALUES (p_tool_call_id, v_block.conversation_id, v_block.id, v_block.prompt_id, p_name, p_input, 'started')
    RETURNING * INTO v_call;
    PERFORM convo._append_event(v_block.conversation_id, 'toolCallStarted',
        jsonb_build_object('toolCall', convo._tool_call_json(v_call), 'input', v_call.input),
        v_call.prompt_id, v_call.block_id, v_call.id);
    RETURN v_call.id;
END;
$$;

-- start_tool_call records a call of the tool name with input on a tool_use
-- block (streaming or ended) of a running prompt, and returns its id. One
-- block holds at most one tool call. Event: toolCallStarted.
CREATE OR REPLACE FUNCTION convo.start_tool_call(block_id uuid, name text, input jsonb) RETURNS uuid
LANGUAGE sql AS $$
    SELECT convo._start_tool_call(start_tool_call.block_id, gen_random_uuid(), start_tool_call.name, start_tool_call.input)
$$;

-- _open_tool_call locks the call's conversation and returns the call,
-- raising unless it exists, is started or running, and its prompt runs.
CREATE OR REPLACE FUNCTION convo._open_tool_call(p_tool_call_id uuid, p_action text) RETURNS convo.tool_calls
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

-- tool_call_progress appends output to a started or running tool call and
-- marks it running. Like append_block, its cost does not grow with the
-- output so far; empty output is a no-op. Event: toolCallProgress.
CREATE OR REPLACE FUNCTION convo.tool_call_progress(tool_call_id uuid, output text) RETURNS void
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

-- complete_tool_call completes a tool call; output, when given, is appended
-- to what progress wrote. Event: toolCallCompleted, whose toolCall holds
-- the whole output.
CREATE OR REPLACE FUNCTION convo.complete_tool_call(tool_call_id uuid, output text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM convo._open_tool_call(complete_tool_call.tool_call_id, 'complete_tool_call');
    PERFORM convo._end_tool_call(complete_tool_call.tool_call_id, complete_tool_call.output, NULL);
END;
$$;

-- fail_tool_call fails a tool call with a non-empty error. Event:
-- toolCallFailed.
CREATE OR REPLACE FUNCTION convo.fail_tool_call(tool_call_id uuid, error text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF error IS NULL OR error = '' THEN
        RAISE EXCEPTION 'fail_tool_call: error must not be empty' USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._open_tool_call(fail_tool_call.tool_call_id, 'fail_tool_call');
    PERFORM convo._end_tool_call(fail_tool_call.tool_call_id, NULL, fail_tool_call.error);
END;
$$;
