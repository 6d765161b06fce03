-- +goose Up

-- Search reads only the caller's conversations.
--
-- The search index (00012_search_vector.sql) held every owner's text
-- blocks under one key per word, and a search joined the blocks it found
-- to their conversations to keep the caller's: a word that the caller's
-- messages hold rarely or not at all, but others' often, read (and
-- rechecked, their vectors detoasted) every matching block of every
-- owner (BenchmarkSearch's othersWord, docs/performance.md). The index
-- now also keys each text block by its conversation: a search asks it for
-- the blocks that hold the words AND belong to one of the caller's
-- conversations (db/queries/search.sql), so the index intersects the two
-- and only the caller's matching blocks are read. A block's conversation never changes, so no column is added and
-- no row rewritten (an owner_id copied into convo.blocks would have had
-- PostgreSQL compute every block's stored search vector again).
--
-- Building it reads every text block's vector, and holds writes to
-- convo.blocks meanwhile (docs/deploy.md, "Upgrades and migrations").
CREATE INDEX blocks_search_conversation_idx ON convo.blocks
    USING gin (search_vector, (ARRAY[conversation_id])) WHERE block_type = 'text';
DROP INDEX convo.blocks_search_idx;

-- This release also adds convo._append_events (db/functions/events.sql)
-- and convo._fail_open_calls (worker_api.sql), through which a prompt that
-- ends fails its open tool calls in one batch. They are defined in
-- db/functions, which db.Migrate applies after the migrations; the Down
-- drops them, as the functions of an earlier release never call them (and
-- _fail_open_calls reads convo.input_requests, which 00014's Down drops),
-- and gives convo._finish_prompt back its loop over _end_tool_call.

-- +goose Down
-- _finish_prompt as the earlier release had it (00014's Down calls it).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._finish_prompt(p_prompt_id uuid, p_status text, p_error text) RETURNS convo.prompts
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
       SET status = p_status, error = p_error, ended_at = now(), lease_expires_at = NULL, waiting = false
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
DROP FUNCTION IF EXISTS convo._fail_open_calls(uuid, text);
DROP FUNCTION IF EXISTS convo._append_events(uuid, text[], jsonb[], uuid[], uuid[], uuid[]);
DROP INDEX convo.blocks_search_conversation_idx;
CREATE INDEX blocks_search_idx ON convo.blocks USING gin (search_vector) WHERE block_type = 'text';
