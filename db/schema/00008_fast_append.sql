-- +goose Up

-- Fast appends. A streamed reply is mostly blockDelta events, one
-- convo.append_block call each, so that call is the write path's hot spot
-- (docs/performance.md, "Sustained deltas per second"). This migration
-- brings it down to three statements on the common path (read the block,
-- update the conversation's row, insert the event) with the same
-- guarantees:
--
-- 1. The conversation row remembers the block that took its latest delta
--    (delta_block_id) and how many append_block calls that block has had
--    (delta_count). Every change that stops a block taking deltas (the
--    block ends or is deleted, its prompt stops running) clears it, under
--    the conversation's lock, by the triggers below. So when append_block's
--    update of the conversation row (which takes the lock and the next
--    seq) finds delta_block_id = its block, the block is streaming and its
--    prompt running as of the latest commit, and the delta_seq check needs
--    no other row: no re-check join, no per-delta update of the block.
--    Anything else (the first delta of a block, another block of the
--    conversation taking a delta in between, a retry, an empty delta, an
--    illegal call) takes the full path, which checks everything under the
--    lock as before.
-- 2. convo.events loses its foreign key to convo.conversations (an RI
--    trigger query on every insert); a statement trigger deletes a
--    deleted conversation's events instead. Every event is inserted by a
--    function that has just updated (and locked) its conversation's row,
--    so no event can name a missing conversation.
-- 3. convo.events loses its two per-block indexes: a block's text and a
--    tool call's output are read through events_prompt_idx, from the seq
--    of the block's blockStart (blocks.start_seq) on. A delta then updates
--    the primary key and events_prompt_idx only.
-- 4. convo.conversations' two CHECK constraints (owner_id, title) become a
--    trigger on those columns: PostgreSQL compiles and evaluates every
--    CHECK constraint of a table on every UPDATE of a row, including the
--    per-event update of last_seq, which writes neither column.

-- delta_block_id is the block that took this conversation's latest
-- append_block call while it streams and its prompt runs (NULL otherwise),
-- and delta_count that block's count of append_block calls. It is not a
-- foreign key: it is cleared whenever the block stops streaming or goes.
-- blocks.delta_count is exact for every other block.
ALTER TABLE convo.conversations
    ADD COLUMN delta_block_id uuid,
    ADD COLUMN delta_count    integer NOT NULL DEFAULT 0;

-- ---------------------------------------------------------------------------
-- convo.conversations' checks, only when their columns are written. The
-- error is the one the constraints raised (SQLSTATE 23514, same names).

-- +goose StatementBegin
CREATE FUNCTION convo._check_conversation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.owner_id = '' THEN
        RAISE EXCEPTION 'new row for relation "conversations" violates check constraint "conversations_owner_id_check"'
            USING ERRCODE = 'check_violation', SCHEMA = 'convo', TABLE = 'conversations',
                  CONSTRAINT = 'conversations_owner_id_check';
    END IF;
    IF length(NEW.title) > 200 THEN
        RAISE EXCEPTION 'new row for relation "conversations" violates check constraint "conversations_title_check"'
            USING ERRCODE = 'check_violation', SCHEMA = 'convo', TABLE = 'conversations',
                  CONSTRAINT = 'conversations_title_check';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER conversations_check
    BEFORE INSERT OR UPDATE OF owner_id, title ON convo.conversations
    FOR EACH ROW EXECUTE FUNCTION convo._check_conversation();

ALTER TABLE convo.conversations
    DROP CONSTRAINT conversations_owner_id_check,
    DROP CONSTRAINT conversations_title_check;

-- ---------------------------------------------------------------------------
-- Keeping delta_block_id true. Each trigger updates the conversation's row,
-- which the functions that end blocks and prompts hold locked already.

-- _block_left_streaming runs before a streaming block ends: it clears the
-- conversation's delta_block_id if it names the block and moves the
-- block's count of append_block calls into blocks.delta_count.
-- +goose StatementBegin
CREATE FUNCTION convo._block_left_streaming() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_count integer;
BEGIN
    UPDATE convo.conversations c SET delta_block_id = NULL
     WHERE c.id = OLD.conversation_id AND c.delta_block_id = OLD.id
    RETURNING c.delta_count INTO v_count;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    IF FOUND THEN
        NEW.delta_count := v_count;
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER blocks_end_delta_cache
    BEFORE UPDATE OF status ON convo.blocks
    FOR EACH ROW WHEN (OLD.status = 'streaming' AND NEW.status IS DISTINCT FROM 'streaming')
    EXECUTE FUNCTION convo._block_left_streaming();

CREATE TRIGGER blocks_delete_delta_cache
    BEFORE DELETE ON convo.blocks
    FOR EACH ROW WHEN (OLD.status = 'streaming')
    EXECUTE FUNCTION convo._block_left_streaming();

-- _prompt_left_running runs after a running prompt changes to another
-- status. _finish_prompt ends the prompt's blocks first (which clears
-- delta_block_id through blocks_end_delta_cache); this covers any other
-- way a prompt stops running.
-- +goose StatementBegin
CREATE FUNCTION convo._prompt_left_running() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    WITH cleared AS (
        UPDATE convo.conversations c SET delta_block_id = NULL
          FROM convo.blocks b
         WHERE c.id = NEW.conversation_id AND b.id = c.delta_block_id AND b.prompt_id = NEW.id
        RETURNING b.id, c.delta_count
    )
    UPDATE convo.blocks b SET delta_count = cleared.delta_count
      FROM cleared
     WHERE b.id = cleared.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER prompts_stop_delta_cache
    AFTER UPDATE OF status ON convo.prompts
    FOR EACH ROW WHEN (OLD.status = 'running' AND NEW.status IS DISTINCT FROM 'running')
    EXECUTE FUNCTION convo._prompt_left_running();

-- ---------------------------------------------------------------------------
-- The event log without its foreign key.

ALTER TABLE convo.events DROP CONSTRAINT events_conversation_id_fkey;

-- _delete_conversation_events deletes the events of deleted conversations,
-- as the foreign key's ON DELETE CASCADE did.
-- +goose StatementBegin
CREATE FUNCTION convo._delete_conversation_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM convo.events e USING deleted d WHERE e.conversation_id = d.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER conversations_delete_events
    AFTER DELETE ON convo.conversations
    REFERENCING OLD TABLE AS deleted
    FOR EACH STATEMENT EXECUTE FUNCTION convo._delete_conversation_events();

-- ---------------------------------------------------------------------------
-- Reading a block's text and a tool call's output through
-- events_prompt_idx (prompt_id, seq), from the block's start on: the events
-- of the prompt since the block started, not the whole prompt.

-- start_seq is the seq of the block's blockStart event: its deltas, and the
-- events of its tool call, come after it. It is NULL for user messages'
-- blocks and for blocks that had ended before this migration (their text
-- is in content).
ALTER TABLE convo.blocks ADD COLUMN start_seq bigint;

UPDATE convo.blocks b
   SET start_seq = (SELECT min(e.seq) FROM convo.events e
                     WHERE e.prompt_id = b.prompt_id AND e.block_id = b.id AND e.kind = 'blockStart')
 WHERE b.prompt_id IS NOT NULL
   AND (b.status = 'streaming'
        OR EXISTS (SELECT 1 FROM convo.tool_calls t WHERE t.block_id = b.id AND t.status IN ('started', 'running')));

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._block_text(p_block_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce(string_agg(e.payload->>'content', '' ORDER BY e.seq), '')
      FROM convo.blocks b
      JOIN convo.events e
        ON e.prompt_id = b.prompt_id AND e.seq > coalesce(b.start_seq, 0)
       AND e.block_id = b.id AND e.kind = 'blockDelta'
     WHERE b.id = p_block_id
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._tool_output(p_tool_call_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce(string_agg(e.payload->>'output', '' ORDER BY e.seq), '')
      FROM convo.tool_calls t
      JOIN convo.blocks b ON b.id = t.block_id
      JOIN convo.events e
        ON e.prompt_id = t.prompt_id AND e.seq > coalesce(b.start_seq, 0)
       AND e.tool_call_id = t.id AND e.kind = 'toolCallProgress'
     WHERE t.id = p_tool_call_id
$$;
-- +goose StatementEnd

-- start_block (00002) again, now recording start_seq: the conversation is
-- locked (by _running_prompt), so blockStart takes its last_seq + 1.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.start_block(prompt_id uuid, block_type text, metadata jsonb DEFAULT '{}')
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
    INSERT INTO convo.blocks (conversation_id, message_id, prompt_id, position, block_type, status, metadata, start_seq)
    VALUES (v_prompt.conversation_id, v_prompt.message_id, v_prompt.id,
            (SELECT coalesce(max(b.position) + 1, 0) FROM convo.blocks b WHERE b.message_id = v_prompt.message_id),
            start_block.block_type, 'streaming', coalesce(start_block.metadata, '{}'),
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
-- +goose StatementEnd

DROP INDEX convo.events_block_delta_idx;
DROP INDEX convo.events_tool_progress_idx;

-- ---------------------------------------------------------------------------
-- append_block (00002) again: same signature, errors and events.

-- +goose StatementBegin
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
        PERFORM pg_notify('convo_events', v_conversation_id::text || ':' || v_seq::text);
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose Down

-- append_block, _block_text, _tool_output and start_block as 00002 defines
-- them.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.append_block(block_id uuid, delta text, delta_seq integer DEFAULT NULL) RETURNS void
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._block_text(p_block_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce(string_agg(e.payload->>'content', '' ORDER BY e.seq), '')
      FROM convo.events e
     WHERE e.block_id = p_block_id AND e.kind = 'blockDelta'
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._tool_output(p_tool_call_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce(string_agg(e.payload->>'output', '' ORDER BY e.seq), '')
      FROM convo.events e
     WHERE e.tool_call_id = p_tool_call_id AND e.kind = 'toolCallProgress'
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.start_block(prompt_id uuid, block_type text, metadata jsonb DEFAULT '{}')
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
ALTER TABLE convo.blocks DROP COLUMN start_seq;

CREATE INDEX events_block_delta_idx ON convo.events (block_id, seq) WHERE kind = 'blockDelta';
CREATE INDEX events_tool_progress_idx ON convo.events (tool_call_id, seq) WHERE kind = 'toolCallProgress';

DROP TRIGGER conversations_delete_events ON convo.conversations;
DROP FUNCTION convo._delete_conversation_events();
-- Events whose conversation went while the trigger was disabled would
-- fail the foreign key.
DELETE FROM convo.events e
 WHERE NOT EXISTS (SELECT 1 FROM convo.conversations c WHERE c.id = e.conversation_id);
ALTER TABLE convo.events
    ADD CONSTRAINT events_conversation_id_fkey FOREIGN KEY (conversation_id)
    REFERENCES convo.conversations (id) ON DELETE CASCADE;

DROP TRIGGER prompts_stop_delta_cache ON convo.prompts;
DROP FUNCTION convo._prompt_left_running();
DROP TRIGGER blocks_delete_delta_cache ON convo.blocks;
DROP TRIGGER blocks_end_delta_cache ON convo.blocks;
DROP FUNCTION convo._block_left_streaming();
-- The cached counts go back to their blocks.
UPDATE convo.blocks b SET delta_count = c.delta_count
  FROM convo.conversations c
 WHERE c.delta_block_id = b.id;
ALTER TABLE convo.conversations DROP COLUMN delta_count, DROP COLUMN delta_block_id;

ALTER TABLE convo.conversations
    ADD CONSTRAINT conversations_owner_id_check CHECK (owner_id <> ''),
    ADD CONSTRAINT conversations_title_check CHECK (length(title) <= 200);
DROP TRIGGER conversations_check ON convo.conversations;
DROP FUNCTION convo._check_conversation();
