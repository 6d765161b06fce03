-- The SQL worker API (docs/worker-api.md is the reference): the blocks of
-- a reply, started, streamed (append_block) and ended.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), in the order of
-- db.FunctionFiles, so a change to a function is an edit here. See
-- db/README.md.

-- _start_block is start_block with the block's id chosen by the caller
-- (write_batch takes it from the worker, which needs no answer to go on).
-- It records start_seq: the conversation is locked (by _running_prompt),
-- so blockStart takes its last_seq + 1.
CREATE OR REPLACE FUNCTION convo._start_block(p_prompt_id uuid, p_block_id uuid, p_block_type text, p_metadata jsonb)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt convo.prompts;
    v_block  convo.blocks;
BEGIN
    IF p_block_type IS NULL OR p_block_type !~ '^[a-z][a-z0-9_]{0,63}$' THEN
        RAISE EXCEPTION 'start_block: block_type % is not a lower_snake name of at most 64 characters', p_block_type
            USING ERRCODE = 'CV003';
    END IF;
    IF p_block_type = 'file' THEN
        RAISE EXCEPTION 'start_block: block_type file is reserved for the files a user attaches (docs/files.md); name a worker''s own output otherwise'
            USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._check_metadata(p_metadata);
    PERFORM convo._json_check(p_metadata, 'start_block: metadata');
    v_prompt := convo._running_prompt(p_prompt_id, 'start_block');
    INSERT INTO convo.blocks (id, conversation_id, message_id, prompt_id, position, block_type, status, metadata, start_seq)
    VALUES (p_block_id, v_prompt.conversation_id, v_prompt.message_id, v_prompt.id,
            (SELECT coalesce(max(b.position) + 1, 0) FROM convo.blocks b WHERE b.message_id = v_prompt.message_id),
            p_block_type, 'streaming', coalesce(p_metadata, '{}'),
            (SELECT c.last_seq + 1 FROM convo.conversations c WHERE c.id = v_prompt.conversation_id))
    RETURNING * INTO v_block;
    PERFORM convo._append_event(v_prompt.conversation_id, 'blockStart',
        jsonb_build_object('promptId', v_prompt.id, 'messageId', v_prompt.message_id,
                           'blockId', v_block.id, 'blockType', v_block.block_type,
                           'metadata', v_block.metadata, 'position', v_block.position),
        v_prompt.id, v_block.id);
    RETURN v_block.id;
END;
$$;

-- start_block opens a streaming block of a running prompt and returns its
-- id. Event: blockStart.
CREATE OR REPLACE FUNCTION convo.start_block(prompt_id uuid, block_type text, metadata jsonb DEFAULT '{}')
RETURNS uuid
LANGUAGE sql AS $$
    SELECT convo._start_block(start_block.prompt_id, gen_random_uuid(), start_block.block_type, start_block.metadata)
$$;

-- _streaming_block locks the block's conversation and returns the block,
-- raising unless it exists, is streaming and its prompt is running.
CREATE OR REPLACE FUNCTION convo._streaming_block(p_block_id uuid, p_action text) RETURNS convo.blocks
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

CREATE OR REPLACE FUNCTION convo.append_block(block_id uuid, delta text, delta_seq integer DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_conversation_id uuid;
    v_prompt_id       uuid;
    v_message_id      uuid;
    v_seq             bigint;
    v_cached_block_id uuid;
    v_cached_count    integer;
    v_block_status    text;
    v_prompt_status   text;
    v_count           integer;
BEGIN
    -- Appends are numbered from 1: a delta_seq below would pass for a
    -- retry of an append applied already, doing nothing.
    IF append_block.delta_seq < 1 THEN
        RAISE EXCEPTION 'append_block: delta_seq must be 1 or more (the number of this append to its block: 1, 2, 3, …), got %',
            append_block.delta_seq USING ERRCODE = 'CV003';
    END IF;
    -- The block's immutable columns need no lock.
    SELECT b.conversation_id, b.prompt_id, b.message_id
      INTO v_conversation_id, v_prompt_id, v_message_id
      FROM convo.blocks b
     WHERE b.id = append_block.block_id;

    -- The common path: the conversation's latest delta went to this block,
    -- so it is still streaming and its prompt running (the triggers above
    -- clear delta_block_id otherwise), and delta_count is its count. The
    -- update takes the conversation's lock and re-evaluates its condition
    -- on the row as the previous holder committed it.
    IF delta <> '' THEN
        UPDATE convo.conversations c
           SET last_seq = c.last_seq + 1, delta_count = c.delta_count + 1
         WHERE c.id = v_conversation_id
           AND c.delta_block_id = append_block.block_id
           AND (append_block.delta_seq IS NULL OR append_block.delta_seq = c.delta_count + 1)
        RETURNING c.last_seq INTO v_seq;
    END IF;

    IF v_seq IS NULL THEN
        -- The full path: everything is checked under the lock.
        IF v_conversation_id IS NULL THEN
            RAISE EXCEPTION 'append_block: block % does not exist', append_block.block_id USING ERRCODE = 'CV001';
        END IF;
        IF v_prompt_id IS NULL THEN
            RAISE EXCEPTION 'append_block: block % belongs to a user message and cannot be written', append_block.block_id
                USING ERRCODE = 'CV002';
        END IF;
        SELECT c.delta_block_id, c.delta_count INTO v_cached_block_id, v_cached_count
          FROM convo.conversations c
         WHERE c.id = v_conversation_id
           FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'conversation % does not exist', v_conversation_id USING ERRCODE = 'CV001';
        END IF;
        SELECT b.status, b.delta_count, p.status INTO v_block_status, v_count, v_prompt_status
          FROM convo.blocks b
          JOIN convo.prompts p ON p.id = b.prompt_id
         WHERE b.id = append_block.block_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'append_block: block % does not exist', append_block.block_id USING ERRCODE = 'CV001';
        END IF;
        IF v_prompt_status = 'queued' THEN
            RAISE EXCEPTION 'append_block: prompt % is queued, not running', v_prompt_id
                USING ERRCODE = 'CV002', HINT = 'call convo.start_prompt first';
        ELSIF v_prompt_status <> 'running' THEN
            RAISE EXCEPTION 'append_block: prompt % is %, not running', v_prompt_id, v_prompt_status
                USING ERRCODE = 'CV002';
        END IF;
        IF v_block_status <> 'streaming' THEN
            RAISE EXCEPTION 'append_block: block % has ended', append_block.block_id USING ERRCODE = 'CV002';
        END IF;
        IF v_cached_block_id = append_block.block_id THEN
            v_count := v_cached_count;
        END IF;
        IF delta_seq IS NOT NULL THEN
            IF delta_seq <= v_count THEN
                RETURN; -- a retry of an append that was applied
            END IF;
            IF delta_seq <> v_count + 1 THEN
                RAISE EXCEPTION 'append_block: delta_seq % skips ahead: block % has % deltas, the next is %',
                    delta_seq, append_block.block_id, v_count, v_count + 1
                    USING ERRCODE = 'CV002';
            END IF;
        END IF;
        -- This block becomes the conversation's delta_block_id; the block that
        -- had it keeps its count in its own row.
        IF v_cached_block_id IS DISTINCT FROM append_block.block_id AND v_cached_block_id IS NOT NULL THEN
            UPDATE convo.blocks b SET delta_count = v_cached_count WHERE b.id = v_cached_block_id;
        END IF;
        UPDATE convo.conversations c
           SET delta_block_id = append_block.block_id,
               delta_count = v_count + 1,
               last_seq = c.last_seq + CASE WHEN delta <> '' THEN 1 ELSE 0 END
         WHERE c.id = v_conversation_id
        RETURNING c.last_seq INTO v_seq;
        IF delta IS NULL OR delta = '' THEN
            RETURN; -- counted, but no event
        END IF;
    END IF;

    INSERT INTO convo.events (conversation_id, seq, kind, prompt_id, block_id, payload)
    VALUES (v_conversation_id, v_seq, 'blockDelta', v_prompt_id, append_block.block_id,
            jsonb_build_object('promptId', v_prompt_id, 'messageId', v_message_id,
                               'blockId', append_block.block_id, 'content', delta));
    IF current_setting('convo.notify_events', true) IS DISTINCT FROM 'off' THEN
        PERFORM convo._notify_event(v_conversation_id, v_seq);
    END IF;
END;
$$;

-- end_block ends a streaming block, merging metadata (a JSON object) into
-- the block's. A structured block must then hold valid JSON that keeps
-- convo's rule for JSON values (_json_check; CV003 otherwise). Event:
-- blockEnd.
CREATE OR REPLACE FUNCTION convo.end_block(block_id uuid, metadata jsonb DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM convo._check_metadata(metadata);
    PERFORM convo._json_check(metadata, 'end_block: metadata');
    PERFORM convo._end_block(convo._streaming_block(end_block.block_id, 'end_block'), end_block.metadata, true);
END;
$$;
