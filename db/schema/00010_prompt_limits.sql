-- +goose Up

-- Per-user limits on the prompt queue, enforced in the database so that
-- every server (and any client in any language calling send_message) obeys
-- them, and fair claiming across users.
--
-- * convo.limits holds the cap on prompts one owner may have queued or
--   running at once (max_active_prompts; 0: no cap). The API server writes
--   its configured value (CONVO_MAX_ACTIVE_PROMPTS) at start; operators may
--   also set it with UPDATE convo.limits SET max_active_prompts = n.
-- * send_message counts the owner's active prompts in the transaction that
--   queues new ones, under a per-owner transaction advisory lock, so two
--   servers cannot both let an owner past the cap. Past it, it raises
--   SQLSTATE CV004 (quota exceeded) and changes nothing.
-- * claim_prompt hands out prompts round-robin across owners: the oldest
--   claimable prompt of the owner whose last claim is the oldest (owners
--   never served first), so one owner's backlog cannot starve the others.

-- owner_id copies the conversation's owner (which never changes), so the
-- quota check and the claim order need no join.
ALTER TABLE convo.prompts ADD COLUMN owner_id text;
UPDATE convo.prompts p SET owner_id = c.owner_id FROM convo.conversations c WHERE c.id = p.conversation_id;
ALTER TABLE convo.prompts ALTER COLUMN owner_id SET NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION convo._prompt_owner() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.owner_id := (SELECT c.owner_id FROM convo.conversations c WHERE c.id = NEW.conversation_id);
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER prompts_owner BEFORE INSERT ON convo.prompts
    FOR EACH ROW EXECUTE FUNCTION convo._prompt_owner();

-- The quota check: an owner's queued and running prompts.
CREATE INDEX prompts_owner_active_idx ON convo.prompts (owner_id) WHERE status IN ('queued', 'running');

-- The settings of the limits: exactly one row.
CREATE TABLE convo.limits (
    id                 boolean PRIMARY KEY DEFAULT true CHECK (id),
    max_active_prompts integer NOT NULL DEFAULT 0 CHECK (max_active_prompts >= 0)
);
INSERT INTO convo.limits DEFAULT VALUES;

-- _check_prompt_quota raises CV004 when the owner's queued and running
-- prompts plus p_new would exceed convo.limits.max_active_prompts. It
-- takes a transaction advisory lock per owner first, so concurrent callers
-- for one owner (on any server) count one after the other: call it before
-- locking any conversation (the order every caller keeps), and in a READ
-- COMMITTED (the default) or SERIALIZABLE transaction, where the count
-- sees every committed prompt.
-- +goose StatementBegin
CREATE FUNCTION convo._check_prompt_quota(p_owner_id text, p_new integer, p_action text) RETURNS void
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
-- +goose StatementEnd

-- When each owner was last handed a prompt, for claim_prompt's round-robin.
CREATE TABLE convo.owner_claims (
    owner_id        text        PRIMARY KEY,
    last_claimed_at timestamptz NOT NULL
);

-- send_message appends a user message (completed at once, one text block)
-- to the owner's conversation, creating the conversation when
-- p_conversation_id is NULL, and queues one prompt with its pending
-- assistant message for each model configuration in p_model_configs (a JSON
-- array of one object, or two for an A/B comparison, whose messages are
-- slots "a" and "b"). A conversation without a title takes the first line
-- of its first message. Events: messageCreated (user), then per prompt
-- messageCreated (assistant) and promptQueued, then conversationUpdated.
-- Notifies "convo_prompts" with 'queued:<prompt id>' per prompt.
--
-- It raises CV004, changing nothing, when the owner's queued and running
-- prompts plus the new ones would exceed convo.limits.max_active_prompts
-- (see _check_prompt_quota).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.send_message(p_owner_id text, p_conversation_id uuid, p_text text, p_model_configs jsonb)
RETURNS TABLE (conversation_id uuid, user_message_id uuid, assistant_message_ids uuid[], prompt_ids uuid[],
               comparison_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv       convo.conversations;
    v_user       convo.messages;
    v_assistant  convo.messages;
    v_prompt     convo.prompts;
    v_block      convo.blocks;
    v_config     jsonb;
    v_slot       integer := 0;
    v_comparison uuid;
    v_messages   uuid[] := '{}';
    v_prompts    uuid[] := '{}';
BEGIN
    IF p_text IS NULL OR p_text !~ '\S' THEN
        RAISE EXCEPTION 'send_message: text must not be empty or only whitespace' USING ERRCODE = 'CV003';
    END IF;
    IF jsonb_typeof(p_model_configs) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_model_configs) NOT BETWEEN 1 AND 2
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_model_configs) c WHERE jsonb_typeof(c.value) <> 'object') THEN
        RAISE EXCEPTION 'send_message: model_configs must be a JSON array of one or two objects' USING ERRCODE = 'CV003';
    END IF;

    -- The quota, before anything is written or locked.
    PERFORM convo._check_prompt_quota(p_owner_id, jsonb_array_length(p_model_configs), 'send_message');

    IF p_conversation_id IS NULL THEN
        INSERT INTO convo.conversations (owner_id) VALUES (p_owner_id) RETURNING * INTO v_conv;
    ELSE
        v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'send_message');
    END IF;

    INSERT INTO convo.messages (conversation_id, position, role, status)
    VALUES (v_conv.id, v_conv.last_seq + 1, 'user', 'completed')
    RETURNING * INTO v_user;
    INSERT INTO convo.blocks (conversation_id, message_id, position, block_type, status, content, ended_at)
    VALUES (v_conv.id, v_user.id, 0, 'text', 'completed', p_text, now())
    RETURNING * INTO v_block;
    PERFORM convo._append_event(v_conv.id, 'messageCreated', jsonb_build_object('message',
        convo._message_json(v_user) || jsonb_build_object('blocks', jsonb_build_array(jsonb_build_object(
            'id', v_block.id, 'blockType', v_block.block_type, 'content', v_block.content,
            'metadata', v_block.metadata, 'status', v_block.status, 'position', v_block.position)))));

    -- Create every prompt (and the comparison) first, then announce them,
    -- so each message's first event already carries its comparison.
    FOR v_config IN SELECT c.value FROM jsonb_array_elements(p_model_configs) c LOOP
        v_slot := v_slot + 1;
        INSERT INTO convo.messages (conversation_id, position, role, status, comparison_slot)
        VALUES (v_conv.id, v_user.position + v_slot, 'assistant', 'pending',
                CASE WHEN jsonb_array_length(p_model_configs) = 2 THEN chr(ascii('a') + v_slot - 1) END)
        RETURNING * INTO v_assistant;
        INSERT INTO convo.prompts (conversation_id, message_id, model_config)
        VALUES (v_conv.id, v_assistant.id, v_config)
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
        PERFORM convo._append_event(v_conv.id, 'messageCreated',
            jsonb_build_object('message', convo._message_json(v_assistant)), v_prompt.id);
        PERFORM convo._append_event(v_conv.id, 'promptQueued',
            jsonb_build_object('prompt', convo._prompt_json(v_prompt)), v_prompt.id);
        PERFORM pg_notify('convo_prompts', 'queued:' || v_prompt.id::text);
    END LOOP;

    UPDATE convo.conversations c
       SET title = CASE WHEN c.title = '' THEN left(btrim(split_part(regexp_replace(p_text, '^\s+', ''), E'\n', 1)), 80)
                        ELSE c.title END,
           active_prompt_id = v_prompts[1],
           last_message_at = now(),
           updated_at = now()
     WHERE c.id = v_conv.id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'conversationUpdated',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));

    RETURN QUERY SELECT v_conv.id, v_user.id, v_messages, v_prompts, v_comparison;
END;
$$;
-- +goose StatementEnd

-- regenerate_reply (00009_regenerate_reply.sql) queues a prompt too: it
-- raises CV004, changing nothing, past the owner's cap.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.regenerate_reply(p_owner_id text, p_conversation_id uuid, p_message_id uuid,
                                       p_model_config jsonb)
RETURNS TABLE (message_id uuid, prompt_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv      convo.conversations;
    v_old       convo.messages;
    v_old_model jsonb;
    v_assistant convo.messages;
    v_prompt    convo.prompts;
BEGIN
    IF p_model_config IS NOT NULL AND jsonb_typeof(p_model_config) <> 'object' THEN
        RAISE EXCEPTION 'regenerate_reply: model_config must be a JSON object' USING ERRCODE = 'CV003';
    END IF;
    -- The quota, before the conversation is locked (see _check_prompt_quota).
    PERFORM convo._check_prompt_quota(p_owner_id, 1, 'regenerate_reply');
    v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'regenerate_reply');

    SELECT * INTO v_old FROM convo.messages m
     WHERE m.conversation_id = v_conv.id AND m.role = 'assistant'
       AND (p_message_id IS NULL OR m.id = p_message_id)
     ORDER BY m.position DESC LIMIT 1;
    IF NOT FOUND THEN
        IF p_message_id IS NULL THEN
            RAISE EXCEPTION 'regenerate_reply: conversation % has no reply to regenerate', v_conv.id USING ERRCODE = 'CV002';
        END IF;
        RAISE EXCEPTION 'regenerate_reply: message % is not a reply in conversation %', p_message_id, v_conv.id
            USING ERRCODE = 'CV001';
    END IF;
    IF EXISTS (SELECT 1 FROM convo.messages m WHERE m.conversation_id = v_conv.id AND m.position > v_old.position
                  AND (m.role = 'user' OR (m.role = 'assistant' AND m.comparison_id IS NULL))) THEN
        RAISE EXCEPTION 'regenerate_reply: message % is not the latest reply; only the latest can be regenerated', v_old.id
            USING ERRCODE = 'CV002';
    END IF;
    IF v_old.comparison_id IS NOT NULL THEN
        RAISE EXCEPTION 'regenerate_reply: message % is part of an A/B comparison', v_old.id USING ERRCODE = 'CV002';
    END IF;
    IF EXISTS (SELECT 1 FROM convo.prompts p WHERE p.conversation_id = v_conv.id AND p.status IN ('queued', 'running')) THEN
        RAISE EXCEPTION 'regenerate_reply: a reply of conversation % is still being written; stop it first', v_conv.id
            USING ERRCODE = 'CV002';
    END IF;
    SELECT p.model_config INTO v_old_model FROM convo.prompts p WHERE p.message_id = v_old.id;

    INSERT INTO convo.messages (conversation_id, position, role, status)
    VALUES (v_conv.id, v_conv.last_seq + 1, 'assistant', 'pending')
    RETURNING * INTO v_assistant;
    INSERT INTO convo.prompts (conversation_id, message_id, model_config)
    VALUES (v_conv.id, v_assistant.id, coalesce(p_model_config, v_old_model, '{}'))
    RETURNING * INTO v_prompt;
    PERFORM convo._append_event(v_conv.id, 'messageCreated',
        jsonb_build_object('message', convo._message_json(v_assistant)), v_prompt.id);
    PERFORM convo._append_event(v_conv.id, 'promptQueued',
        jsonb_build_object('prompt', convo._prompt_json(v_prompt)), v_prompt.id);
    PERFORM pg_notify('convo_prompts', 'queued:' || v_prompt.id::text);

    UPDATE convo.conversations c
       SET active_prompt_id = v_prompt.id, last_message_at = now(), updated_at = now()
     WHERE c.id = v_conv.id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'conversationUpdated',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));

    RETURN QUERY SELECT v_assistant.id, v_prompt.id;
END;
$$;
-- +goose StatementEnd

-- claim_prompt hands a claimable prompt to worker for lease_seconds: a
-- queued prompt nobody holds, or one whose holder's lease expired before it
-- started it. Owners are served round-robin: it takes the oldest claimable
-- prompt of the owner whose last claim is the oldest (an owner never served
-- comes first, the oldest prompt breaking ties), skipping prompts other
-- workers hold locked. It returns no row when the queue is empty. Its cost
-- grows with the number of claimable prompts, which the per-owner cap
-- bounds.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.claim_prompt(worker text, lease_seconds integer)
RETURNS TABLE (prompt_id uuid, conversation_id uuid, message_id uuid, model_config jsonb, attempts integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_id    uuid;
    v_owner text;
BEGIN
    IF worker IS NULL OR worker = '' THEN
        RAISE EXCEPTION 'claim_prompt: worker must be a non-empty name' USING ERRCODE = 'CV003';
    END IF;
    IF lease_seconds IS NULL OR lease_seconds < 1 OR lease_seconds > 3600 THEN
        RAISE EXCEPTION 'claim_prompt: lease_seconds must be between 1 and 3600, got %', lease_seconds
            USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo.expire_leases();
    SELECT q.id, q.owner_id INTO v_id, v_owner
      FROM convo.prompts q
      LEFT JOIN convo.owner_claims o ON o.owner_id = q.owner_id
     WHERE q.status = 'queued'
       AND (q.lease_expires_at IS NULL OR q.lease_expires_at < now())
     ORDER BY o.last_claimed_at NULLS FIRST, q.created_at, q.id
     LIMIT 1
       FOR UPDATE OF q SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- clock_timestamp, not now(): two claims in one transaction must
    -- still order their owners.
    INSERT INTO convo.owner_claims AS o (owner_id, last_claimed_at) VALUES (v_owner, clock_timestamp())
        ON CONFLICT (owner_id) DO UPDATE SET last_claimed_at = excluded.last_claimed_at;
    RETURN QUERY
    UPDATE convo.prompts p
       SET worker = claim_prompt.worker,
           lease_seconds = claim_prompt.lease_seconds,
           lease_expires_at = now() + make_interval(secs => claim_prompt.lease_seconds),
           attempts = p.attempts + 1
     WHERE p.id = v_id
    RETURNING p.id, p.conversation_id, p.message_id, p.model_config, p.attempts;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- regenerate_reply as in 00009_regenerate_reply.sql.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.regenerate_reply(p_owner_id text, p_conversation_id uuid, p_message_id uuid,
                                       p_model_config jsonb)
RETURNS TABLE (message_id uuid, prompt_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv      convo.conversations;
    v_old       convo.messages;
    v_old_model jsonb;
    v_assistant convo.messages;
    v_prompt    convo.prompts;
BEGIN
    IF p_model_config IS NOT NULL AND jsonb_typeof(p_model_config) <> 'object' THEN
        RAISE EXCEPTION 'regenerate_reply: model_config must be a JSON object' USING ERRCODE = 'CV003';
    END IF;
    v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'regenerate_reply');

    SELECT * INTO v_old FROM convo.messages m
     WHERE m.conversation_id = v_conv.id AND m.role = 'assistant'
       AND (p_message_id IS NULL OR m.id = p_message_id)
     ORDER BY m.position DESC LIMIT 1;
    IF NOT FOUND THEN
        IF p_message_id IS NULL THEN
            RAISE EXCEPTION 'regenerate_reply: conversation % has no reply to regenerate', v_conv.id USING ERRCODE = 'CV002';
        END IF;
        RAISE EXCEPTION 'regenerate_reply: message % is not a reply in conversation %', p_message_id, v_conv.id
            USING ERRCODE = 'CV001';
    END IF;
    IF EXISTS (SELECT 1 FROM convo.messages m WHERE m.conversation_id = v_conv.id AND m.position > v_old.position
                  AND (m.role = 'user' OR (m.role = 'assistant' AND m.comparison_id IS NULL))) THEN
        RAISE EXCEPTION 'regenerate_reply: message % is not the latest reply; only the latest can be regenerated', v_old.id
            USING ERRCODE = 'CV002';
    END IF;
    IF v_old.comparison_id IS NOT NULL THEN
        RAISE EXCEPTION 'regenerate_reply: message % is part of an A/B comparison', v_old.id USING ERRCODE = 'CV002';
    END IF;
    IF EXISTS (SELECT 1 FROM convo.prompts p WHERE p.conversation_id = v_conv.id AND p.status IN ('queued', 'running')) THEN
        RAISE EXCEPTION 'regenerate_reply: a reply of conversation % is still being written; stop it first', v_conv.id
            USING ERRCODE = 'CV002';
    END IF;
    SELECT p.model_config INTO v_old_model FROM convo.prompts p WHERE p.message_id = v_old.id;

    INSERT INTO convo.messages (conversation_id, position, role, status)
    VALUES (v_conv.id, v_conv.last_seq + 1, 'assistant', 'pending')
    RETURNING * INTO v_assistant;
    INSERT INTO convo.prompts (conversation_id, message_id, model_config)
    VALUES (v_conv.id, v_assistant.id, coalesce(p_model_config, v_old_model, '{}'))
    RETURNING * INTO v_prompt;
    PERFORM convo._append_event(v_conv.id, 'messageCreated',
        jsonb_build_object('message', convo._message_json(v_assistant)), v_prompt.id);
    PERFORM convo._append_event(v_conv.id, 'promptQueued',
        jsonb_build_object('prompt', convo._prompt_json(v_prompt)), v_prompt.id);
    PERFORM pg_notify('convo_prompts', 'queued:' || v_prompt.id::text);

    UPDATE convo.conversations c
       SET active_prompt_id = v_prompt.id, last_message_at = now(), updated_at = now()
     WHERE c.id = v_conv.id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'conversationUpdated',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));

    RETURN QUERY SELECT v_assistant.id, v_prompt.id;
END;
$$;
-- +goose StatementEnd

-- claim_prompt as in 00002_worker_api.sql.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.claim_prompt(worker text, lease_seconds integer)
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

-- send_message as in 00003_client_api.sql.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo.send_message(p_owner_id text, p_conversation_id uuid, p_text text, p_model_configs jsonb)
RETURNS TABLE (conversation_id uuid, user_message_id uuid, assistant_message_ids uuid[], prompt_ids uuid[],
               comparison_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv       convo.conversations;
    v_user       convo.messages;
    v_assistant  convo.messages;
    v_prompt     convo.prompts;
    v_block      convo.blocks;
    v_config     jsonb;
    v_slot       integer := 0;
    v_comparison uuid;
    v_messages   uuid[] := '{}';
    v_prompts    uuid[] := '{}';
BEGIN
    IF p_text IS NULL OR p_text !~ '\S' THEN
        RAISE EXCEPTION 'send_message: text must not be empty or only whitespace' USING ERRCODE = 'CV003';
    END IF;
    IF jsonb_typeof(p_model_configs) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_model_configs) NOT BETWEEN 1 AND 2
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_model_configs) c WHERE jsonb_typeof(c.value) <> 'object') THEN
        RAISE EXCEPTION 'send_message: model_configs must be a JSON array of one or two objects' USING ERRCODE = 'CV003';
    END IF;

    IF p_conversation_id IS NULL THEN
        INSERT INTO convo.conversations (owner_id) VALUES (p_owner_id) RETURNING * INTO v_conv;
    ELSE
        v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'send_message');
    END IF;

    INSERT INTO convo.messages (conversation_id, position, role, status)
    VALUES (v_conv.id, v_conv.last_seq + 1, 'user', 'completed')
    RETURNING * INTO v_user;
    INSERT INTO convo.blocks (conversation_id, message_id, position, block_type, status, content, ended_at)
    VALUES (v_conv.id, v_user.id, 0, 'text', 'completed', p_text, now())
    RETURNING * INTO v_block;
    PERFORM convo._append_event(v_conv.id, 'messageCreated', jsonb_build_object('message',
        convo._message_json(v_user) || jsonb_build_object('blocks', jsonb_build_array(jsonb_build_object(
            'id', v_block.id, 'blockType', v_block.block_type, 'content', v_block.content,
            'metadata', v_block.metadata, 'status', v_block.status, 'position', v_block.position)))));

    -- Create every prompt (and the comparison) first, then announce them,
    -- so each message's first event already carries its comparison.
    FOR v_config IN SELECT c.value FROM jsonb_array_elements(p_model_configs) c LOOP
        v_slot := v_slot + 1;
        INSERT INTO convo.messages (conversation_id, position, role, status, comparison_slot)
        VALUES (v_conv.id, v_user.position + v_slot, 'assistant', 'pending',
                CASE WHEN jsonb_array_length(p_model_configs) = 2 THEN chr(ascii('a') + v_slot - 1) END)
        RETURNING * INTO v_assistant;
        INSERT INTO convo.prompts (conversation_id, message_id, model_config)
        VALUES (v_conv.id, v_assistant.id, v_config)
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
        PERFORM convo._append_event(v_conv.id, 'messageCreated',
            jsonb_build_object('message', convo._message_json(v_assistant)), v_prompt.id);
        PERFORM convo._append_event(v_conv.id, 'promptQueued',
            jsonb_build_object('prompt', convo._prompt_json(v_prompt)), v_prompt.id);
        PERFORM pg_notify('convo_prompts', 'queued:' || v_prompt.id::text);
    END LOOP;

    UPDATE convo.conversations c
       SET title = CASE WHEN c.title = '' THEN left(btrim(split_part(regexp_replace(p_text, '^\s+', ''), E'\n', 1)), 80)
                        ELSE c.title END,
           active_prompt_id = v_prompts[1],
           last_message_at = now(),
           updated_at = now()
     WHERE c.id = v_conv.id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'conversationUpdated',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));

    RETURN QUERY SELECT v_conv.id, v_user.id, v_messages, v_prompts, v_comparison;
END;
$$;
-- +goose StatementEnd

DROP TABLE convo.owner_claims;
DROP TABLE convo.limits;
DROP INDEX convo.prompts_owner_active_idx;
DROP TRIGGER prompts_owner ON convo.prompts;
DROP FUNCTION convo._prompt_owner();
ALTER TABLE convo.prompts DROP COLUMN owner_id;
DROP FUNCTION convo._check_prompt_quota(text, integer, text);
