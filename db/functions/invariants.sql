-- Trigger functions that keep the tables' invariants whatever writes them.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), so a change to a function is
-- an edit here. See db/README.md.

CREATE OR REPLACE FUNCTION convo._check_conversation() RETURNS trigger
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

-- _block_left_streaming runs before a streaming block ends: it clears the
-- conversation's delta_block_id if it names the block and moves the
-- block's count of append_block calls into blocks.delta_count.
CREATE OR REPLACE FUNCTION convo._block_left_streaming() RETURNS trigger
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

-- _prompt_left_running runs after a running prompt changes to another
-- status. _finish_prompt ends the prompt's blocks first (which clears
-- delta_block_id through blocks_end_delta_cache); this covers any other
-- way a prompt stops running.
CREATE OR REPLACE FUNCTION convo._prompt_left_running() RETURNS trigger
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

-- _delete_conversation_events deletes the events of deleted conversations,
-- as the foreign key's ON DELETE CASCADE did.
CREATE OR REPLACE FUNCTION convo._delete_conversation_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM convo.events e USING deleted d WHERE e.conversation_id = d.id;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION convo._prompt_owner() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.owner_id := (SELECT c.owner_id FROM convo.conversations c WHERE c.id = NEW.conversation_id);
    RETURN NEW;
END;
$$;

-- _check_prompt_quota raises CV004 when the owner's queued and running
-- prompts plus p_new would exceed convo.limits.max_active_prompts. It
-- takes a transaction advisory lock per owner first, so concurrent callers
-- for one owner (on any server) count one after the other: call it before
-- locking any conversation (the order every caller keeps), and in a READ
-- COMMITTED (the default) or SERIALIZABLE transaction, where the count
-- sees every committed prompt.
CREATE OR REPLACE FUNCTION convo._check_prompt_quota(p_owner_id text, p_new integer, p_action text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_cap    integer;
    v_active bigint;
BEGIN
    SELECT l.max_active_prompts INTO v_cap FROM convo.limits l;
    IF coalesce(v_cap, 0) = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('convo.active_prompts:' || p_owner_id, 0));
    SELECT count(*) INTO v_active FROM convo.prompts p
     WHERE p.owner_id = p_owner_id AND p.status IN ('queued', 'running');
    IF v_active + p_new > v_cap THEN
        RAISE EXCEPTION '%: too many prompts in flight: % queued or running, and at most % (max_active_prompts) are allowed per user; wait for a reply to finish or cancel one',
            p_action, v_active, v_cap USING ERRCODE = 'CV004';
    END IF;
END;
$$;

-- _prompt_claimable runs after a prompt becomes claimable (queued, or
-- handed back by its worker): its owner waits in convo.owner_queue, since
-- the prompt was queued unless it already waited longer. See _claim_next.
CREATE OR REPLACE FUNCTION convo._prompt_claimable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO convo.owner_queue AS o (owner_id, waiting_since) VALUES (NEW.owner_id, NEW.created_at)
        ON CONFLICT (owner_id) DO UPDATE SET waiting_since = excluded.waiting_since
        WHERE o.waiting_since IS NULL OR o.waiting_since > excluded.waiting_since;
    RETURN NULL;
END;
$$;
