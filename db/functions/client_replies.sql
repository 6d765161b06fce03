-- The client API (what the server calls for its users' requests): what
-- changes a reply or the path of a conversation: regenerating a reply,
-- editing a message, switching branches and versions, sending after an
-- earlier response, deleting a response, and cancelling a prompt.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), in the order of
-- db.FunctionFiles, so a change to a function is an edit here. See
-- db/README.md.

-- _check_no_reply_in_flight raises CV002 when a prompt of the conversation
-- is unfinished (queued, waiting for an answer, or running): the active
-- path changes (edit_message, regenerate_reply, switch_branch) only
-- between replies, so a reply is never written off the path its readers
-- follow. The message names the prompt, which CancelPrompt stops.
CREATE OR REPLACE FUNCTION convo._check_no_reply_in_flight(p_conversation_id uuid, p_action text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt uuid;
BEGIN
    SELECT p.id INTO v_prompt FROM convo.prompts p
     WHERE p.conversation_id = p_conversation_id AND p.status IN ('queued', 'running')
     ORDER BY p.created_at LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%: a reply of conversation % is still being written (prompt %); cancel it or wait for it to end',
            p_action, p_conversation_id, v_prompt USING ERRCODE = 'CV002';
    END IF;
END;
$$;

-- _queue_reply inserts a pending reply below p_parent at p_position (off
-- the active path: _change_path marks it) and its queued prompt, and notifies
-- "convo_prompts"; the caller writes promptQueued after branchSwitched.
CREATE OR REPLACE FUNCTION convo._queue_reply(p_conversation_id uuid, p_parent uuid, p_position bigint,
                                              p_model_config jsonb)
RETURNS convo.prompts
LANGUAGE plpgsql AS $$
DECLARE
    v_assistant convo.messages;
    v_prompt    convo.prompts;
BEGIN
    INSERT INTO convo.messages (conversation_id, position, role, status, parent_id, on_active_path)
    VALUES (p_conversation_id, p_position, 'assistant', 'pending', p_parent, false)
    RETURNING * INTO v_assistant;
    INSERT INTO convo.prompts (conversation_id, message_id, model_config, trace_context)
    VALUES (p_conversation_id, v_assistant.id, p_model_config, convo._trace_context())
    RETURNING * INTO v_prompt;
    PERFORM convo._notify_prompt('queued', v_prompt.id);
    RETURN v_prompt;
END;
$$;

-- _queued_reply writes the events of a reply _queue_reply queued, after
-- branchSwitched: promptQueued, then conversationUpdated (the prompt is
-- the active one, the conversation's last message time now).
CREATE OR REPLACE FUNCTION convo._queued_reply(p_prompt convo.prompts) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
BEGIN
    PERFORM convo._append_event(p_prompt.conversation_id, 'promptQueued',
        jsonb_build_object('prompt', convo._prompt_json(p_prompt)), p_prompt.id);
    UPDATE convo.conversations c
       SET active_prompt_id = p_prompt.id, last_message_at = now(), updated_at = now()
     WHERE c.id = p_prompt.conversation_id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'conversationUpdated',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));
END;
$$;

-- regenerate_reply writes a reply again: a new pending reply, with its
-- queued prompt, as a sibling of p_message_id (below the same user
-- message), which becomes the active leaf; the old reply, and whatever
-- followed it, stay on their branch (switch_branch goes back to them).
-- p_message_id NULL: the active path's latest reply. p_model_config is the
-- new prompt's model configuration (NULL: the old reply's). Events:
-- branchSwitched (the new reply, pending), promptQueued,
-- conversationUpdated. Notifies "convo_prompts" with 'queued:<prompt id>'.
-- Errors, changing nothing: CV003 a model configuration that is not a
-- JSON object; CV001 an unknown conversation (or one the caller has no
-- role in), CV005 one the caller only views (both before the quota,
-- _check_member); CV004 past the conversation owner's cap
-- (_check_prompt_quota); CV001 an unknown message, or one of another
-- conversation;
-- CV002 a user message, a reply of an A/B comparison, a conversation with
-- no reply, or a reply still being written
-- (_check_no_reply_in_flight).
CREATE OR REPLACE FUNCTION convo.regenerate_reply(p_owner_id text, p_conversation_id uuid, p_message_id uuid,
                                       p_model_config jsonb)
RETURNS TABLE (message_id uuid, prompt_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv      convo.conversations;
    v_old       convo.messages;
    v_old_model jsonb;
    v_prompt    convo.prompts;
BEGIN
    IF p_model_config IS NOT NULL AND jsonb_typeof(p_model_config) <> 'object' THEN
        RAISE EXCEPTION 'regenerate_reply: model_config must be a JSON object' USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._json_check(p_model_config, 'regenerate_reply: model_config');
    -- The caller's role, then the quota (the owner's), before the
    -- conversation is locked (see _check_member, _check_prompt_quota).
    PERFORM convo._check_prompt_quota(convo._check_member(p_owner_id, p_conversation_id, 'regenerate_reply', 'participant'),
                                      1, 'regenerate_reply');
    v_conv := convo._conversation_as(p_owner_id, p_conversation_id, 'regenerate_reply', 'participant');

    IF p_message_id IS NULL THEN
        SELECT * INTO v_old FROM convo.messages m
         WHERE m.conversation_id = v_conv.id AND m.on_active_path AND m.role = 'assistant'
         ORDER BY m.position DESC LIMIT 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'regenerate_reply: conversation % has no reply to regenerate', v_conv.id USING ERRCODE = 'CV002';
        END IF;
    ELSE
        SELECT * INTO v_old FROM convo.messages m WHERE m.conversation_id = v_conv.id AND m.id = p_message_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'regenerate_reply: message % is not a message of conversation %', p_message_id, v_conv.id
                USING ERRCODE = 'CV001';
        END IF;
        IF v_old.role <> 'assistant' THEN
            RAISE EXCEPTION 'regenerate_reply: message % is a % message; only replies are regenerated (edit a user message instead)',
                v_old.id, v_old.role USING ERRCODE = 'CV002';
        END IF;
    END IF;
    IF v_old.comparison_id IS NOT NULL THEN
        RAISE EXCEPTION 'regenerate_reply: message % is part of an A/B comparison', v_old.id USING ERRCODE = 'CV002';
    END IF;
    PERFORM convo._check_no_reply_in_flight(v_conv.id, 'regenerate_reply');
    SELECT p.model_config INTO v_old_model FROM convo.prompts p WHERE p.message_id = v_old.id;

    v_prompt := convo._queue_reply(v_conv.id, v_old.parent_id, v_conv.last_seq + 1, coalesce(p_model_config, v_old_model, '{}'));
    PERFORM convo._change_path(v_conv.id, v_prompt.message_id);
    PERFORM convo._queued_reply(v_prompt);
    RETURN QUERY SELECT v_prompt.message_id, v_prompt.id;
END;
$$;

-- edit_message edits the user's message p_message_id: a new user message
-- with p_text (one text block) as its sibling (below the same parent),
-- and a pending reply below it with its queued prompt, which becomes the
-- active leaf; the old message and its replies stay on their branch.
-- p_model_config is the reply's model configuration (NULL: the
-- configuration of the old message's latest reply, slot "a" of a
-- comparison; one reply either way). Events: branchSwitched (the new
-- message with its block, and the pending reply), conversationUpdated when
-- the edit of the first message retitles the conversation
-- (_follow_first_message), promptQueued, conversationUpdated. Notifies
-- "convo_prompts" with 'queued:<prompt id>'.
-- Errors, changing nothing: CV003 text that shows nothing, a model
-- configuration that is not a JSON object; CV001 an unknown conversation
-- (or one the caller has no role in;
-- CV005 one the caller only views: before the quota, _check_member); CV004 past the
-- owner's cap; CV001 an unknown message, or a message of another
-- conversation; CV002 a message that is not the user's (an assistant or
-- system message), or a reply still being written
-- (_check_no_reply_in_flight: edit while a reply streams is refused).
CREATE OR REPLACE FUNCTION convo.edit_message(p_owner_id text, p_conversation_id uuid, p_message_id uuid,
                                              p_text text, p_model_config jsonb, p_file_ids uuid[] DEFAULT '{}')
RETURNS TABLE (user_message_id uuid, assistant_message_id uuid, prompt_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv      convo.conversations;
    v_old       convo.messages;
    v_old_model jsonb;
    v_user      convo.messages;
    v_prompt    convo.prompts;
BEGIN
    IF (p_text IS NULL OR NOT convo._has_visible(p_text)) AND cardinality(coalesce(p_file_ids, '{}')) = 0 THEN
        RAISE EXCEPTION 'edit_message: text must not be empty or only whitespace, control, zero-width, bidi control or blank (U+2800, ...) characters'
            USING ERRCODE = 'CV003';
    END IF;
    IF p_model_config IS NOT NULL AND jsonb_typeof(p_model_config) <> 'object' THEN
        RAISE EXCEPTION 'edit_message: model_config must be a JSON object' USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._json_check(p_model_config, 'edit_message: model_config');
    PERFORM convo._check_prompt_quota(convo._check_member(p_owner_id, p_conversation_id, 'edit_message', 'participant'),
                                      1, 'edit_message');
    v_conv := convo._conversation_as(p_owner_id, p_conversation_id, 'edit_message', 'participant');

    SELECT * INTO v_old FROM convo.messages m WHERE m.conversation_id = v_conv.id AND m.id = p_message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'edit_message: message % is not a message of conversation %', p_message_id, v_conv.id
            USING ERRCODE = 'CV001';
    END IF;
    IF v_old.role <> 'user' THEN
        RAISE EXCEPTION 'edit_message: message % is an % message; only the user''s messages can be edited (regenerate a reply instead)',
            v_old.id, v_old.role USING ERRCODE = 'CV002';
    END IF;
    PERFORM convo._check_no_reply_in_flight(v_conv.id, 'edit_message');
    SELECT p.model_config INTO v_old_model
      FROM convo.messages r JOIN convo.prompts p ON p.message_id = r.id
     WHERE r.parent_id = v_old.id AND r.comparison_slot IS DISTINCT FROM 'b'
     ORDER BY r.position DESC LIMIT 1;

    INSERT INTO convo.messages (conversation_id, position, role, status, parent_id, on_active_path, sender_id)
    VALUES (v_conv.id, v_conv.last_seq + 1, 'user', 'completed', v_old.parent_id, false, p_owner_id)
    RETURNING * INTO v_user;
    PERFORM convo._write_user_blocks(p_owner_id, v_user, p_text, p_file_ids, 'edit_message');
    v_prompt := convo._queue_reply(v_conv.id, v_user.id, v_user.position + 1, coalesce(p_model_config, v_old_model, '{}'));
    PERFORM convo._change_path(v_conv.id, v_prompt.message_id);
    PERFORM convo._queued_reply(v_prompt);
    RETURN QUERY SELECT v_user.id, v_prompt.message_id, v_prompt.id;
END;
$$;

-- switch_branch shows another version: the active leaf becomes the
-- newest message below p_message_id (p_message_id itself when nothing is
-- below it; slot "a" for slot "b" of a comparison), and the active path
-- the path down to it. It returns the new leaf. Switching to the branch
-- already shown changes nothing and writes nothing. Event: branchSwitched,
-- then conversationUpdated when a switch between versions of the first
-- message retitles the conversation (_follow_first_message).
-- Errors, changing nothing: CV001 an unknown conversation or message, or
-- a message of another conversation; CV002 while a reply is being
-- written (_check_no_reply_in_flight).
CREATE OR REPLACE FUNCTION convo.switch_branch(p_owner_id text, p_conversation_id uuid, p_message_id uuid)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_conv   convo.conversations;
    v_leaf   convo.messages;
    v_start  uuid;
    v_newest uuid;
BEGIN
    v_conv := convo._conversation_as(p_owner_id, p_conversation_id, 'switch_branch', 'participant');
    IF NOT EXISTS (SELECT 1 FROM convo.messages m WHERE m.conversation_id = v_conv.id AND m.id = p_message_id) THEN
        RAISE EXCEPTION 'switch_branch: message % is not a message of conversation %', p_message_id, v_conv.id
            USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._check_no_reply_in_flight(v_conv.id, 'switch_branch');
    -- What follows a comparison hangs below slot "a".
    v_start := coalesce((SELECT a.id FROM convo.messages b JOIN convo.messages a
                           ON a.comparison_id = b.comparison_id AND a.comparison_slot = 'a'
                          WHERE b.id = p_message_id AND b.comparison_slot = 'b'), p_message_id);
    -- The newest message below it: down the tree in one recursive query,
    -- each message's children one look-up of messages_parent_idx. The
    -- children are a LATERAL subquery kept apart (OFFSET 0), so the only
    -- plan is that look-up per message: as a plain join, the planner ran
    -- a scan of the conversation per level (1.4 s down a branch of 1,600
    -- messages), and a loop of one statement per level cost most of a
    -- long switch (docs/performance.md).
    WITH RECURSIVE below AS (
        SELECT m.id, m.position FROM convo.messages m WHERE m.id = v_start
        UNION ALL
        SELECT x.id, x.position
          FROM below
         CROSS JOIN LATERAL (SELECT c.id, c.position FROM convo.messages c
                              WHERE c.parent_id = below.id OFFSET 0) x
    )
    SELECT b.id INTO v_newest FROM below b ORDER BY b.position DESC LIMIT 1;
    SELECT m.* INTO v_leaf FROM convo.messages m WHERE m.id = v_newest;
    -- A pair with nothing below it: its slot "b" is the newer of the two.
    IF v_leaf.comparison_slot = 'b' THEN
        SELECT m.* INTO v_leaf FROM convo.messages m
         WHERE m.comparison_id = v_leaf.comparison_id AND m.comparison_slot = 'a';
    END IF;
    IF v_leaf.id IS DISTINCT FROM convo._active_leaf(v_conv.id) THEN
        PERFORM convo._change_path(v_conv.id, v_leaf.id);
    END IF;
    RETURN v_leaf.id;
END;
$$;

-- send_after sends p_text as the user's message that follows the message
-- p_after_message_id (a reply, as an OpenAI previous_response_id names
-- it), in one statement: when that message is not on the active path,
-- its branch is shown first (switch_branch); then the text hangs below it
-- when nothing follows it on the path (send_message, one reply with
-- p_model_config), or is a new version of the user message that follows
-- it there (edit_message). It returns the new user message and its
-- reply's prompt. All or nothing: a refusal of any step (empty text, the
-- quota, a reply being written) changes nothing, the switch included.
-- The quota is taken before the conversation's lock, the order every
-- caller keeps (_check_prompt_quota).
-- p_file_ids are the files the user message holds, as send_message and
-- edit_message take them (_write_user_blocks); with files, p_text may
-- show nothing.
-- Errors, changing nothing: those of send_message, edit_message and
-- switch_branch; CV001 an unknown conversation (or one the caller has no
-- role in; CV005 one the caller only views), or
-- a message that is not one of the conversation's.
CREATE OR REPLACE FUNCTION convo.send_after(p_owner_id text, p_conversation_id uuid, p_after_message_id uuid,
                                            p_text text, p_model_config jsonb, p_file_ids uuid[] DEFAULT '{}')
RETURNS TABLE (user_message_id uuid, prompt_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv  convo.conversations;
    v_after convo.messages;
    v_next  uuid;
BEGIN
    PERFORM convo._check_prompt_quota(convo._check_member(p_owner_id, p_conversation_id, 'send_after', 'participant'),
                                      1, 'send_after');
    v_conv := convo._conversation_as(p_owner_id, p_conversation_id, 'send_after', 'participant');
    SELECT * INTO v_after FROM convo.messages m WHERE m.conversation_id = v_conv.id AND m.id = p_after_message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'send_after: message % is not a message of conversation %', p_after_message_id, v_conv.id
            USING ERRCODE = 'CV001';
    END IF;
    IF NOT v_after.on_active_path THEN
        PERFORM convo.switch_branch(p_owner_id, v_conv.id, v_after.id);
    END IF;
    -- Positions grow down every path: the first user message of the path
    -- after the reply is the one that follows it (past the other reply
    -- of a comparison).
    SELECT m.id INTO v_next FROM convo.messages m
     WHERE m.conversation_id = v_conv.id AND m.on_active_path AND m.role = 'user' AND m.position > v_after.position
     ORDER BY m.position LIMIT 1;
    IF v_next IS NULL THEN
        RETURN QUERY SELECT s.user_message_id, s.prompt_ids[1]
          FROM convo.send_message(p_owner_id, v_conv.id, p_text, jsonb_build_array(coalesce(p_model_config, '{}')),
                                  v_after.id, p_file_ids) s;
    ELSE
        RETURN QUERY SELECT e.user_message_id, e.prompt_id
          FROM convo.edit_message(p_owner_id, v_conv.id, v_next, p_text, p_model_config, p_file_ids) e;
    END IF;
END;
$$;

-- delete_response deletes the reply of prompt p_prompt_id from OpenAI's
-- Responses API (DELETE /v1/responses/{id}, docs/openai.md): a row of
-- convo.deleted_responses, which the API's reads answer as not found. The
-- conversation's messages stay, the reply's included (as an OpenAI
-- conversation's items stay). A reply still queued or running is
-- cancelled first (cancel_prompt, its events): nothing goes on writing a
-- response no one can read.
-- Errors, changing nothing: CV001 a prompt that does not exist, is
-- another owner's, or was deleted already.
CREATE OR REPLACE FUNCTION convo.delete_response(p_owner_id text, p_prompt_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt convo.prompts;
BEGIN
    SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = p_prompt_id AND p.owner_id = p_owner_id;
    IF FOUND THEN
        -- Two deletes at once: one inserts, the other finds it deleted.
        INSERT INTO convo.deleted_responses (prompt_id) VALUES (v_prompt.id) ON CONFLICT DO NOTHING;
    END IF;
    -- FOUND now: the prompt is the owner's and this call marked it.
    IF NOT FOUND THEN
        RAISE EXCEPTION 'delete_response: response % does not exist', p_prompt_id USING ERRCODE = 'CV001';
    END IF;
    IF v_prompt.status IN ('queued', 'running') THEN
        PERFORM convo.cancel_prompt(v_prompt.id);
    END IF;
END;
$$;

-- switch_version shows version p_sibling_index (from 0, in the order they
-- were made, as _sibling_place numbers them) of the turn of p_message_id,
-- any version of that turn: switch_branch to that sibling (slot "a" of a
-- comparison). A client showing "‹ n / m ›" on a message knows the
-- message and the index it wants, not the other versions' ids: this is
-- the step to the previous or next version. It returns the new leaf.
-- Errors, changing nothing: CV001 an unknown conversation or message, or
-- a message of another conversation; CV003 an index outside the turn's
-- versions (naming their count); CV002 while a reply is being written.
CREATE OR REPLACE FUNCTION convo.switch_version(p_owner_id text, p_conversation_id uuid, p_message_id uuid,
                                                p_sibling_index integer)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_conv     convo.conversations;
    v_msg      convo.messages;
    v_versions uuid[];
BEGIN
    v_conv := convo._conversation_as(p_owner_id, p_conversation_id, 'switch_version', 'participant');
    SELECT * INTO v_msg FROM convo.messages m WHERE m.conversation_id = v_conv.id AND m.id = p_message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'switch_version: message % is not a message of conversation %', p_message_id, v_conv.id
            USING ERRCODE = 'CV001';
    END IF;
    -- The turn's versions as _sibling_place counts them: slot "b" of a
    -- comparison shares its slot "a"'s place.
    v_versions := ARRAY(
        SELECT x.id FROM convo.messages x
         WHERE x.conversation_id = v_conv.id AND x.parent_id IS NOT DISTINCT FROM v_msg.parent_id
           AND x.comparison_slot IS DISTINCT FROM 'b'
         ORDER BY x.position);
    IF p_sibling_index IS NULL OR p_sibling_index < 0 OR p_sibling_index >= cardinality(v_versions) THEN
        RAISE EXCEPTION 'switch_version: siblingIndex % is out of range: the turn of message % has % version(s), from 0',
            coalesce(p_sibling_index::text, 'NULL'), v_msg.id, cardinality(v_versions) USING ERRCODE = 'CV003';
    END IF;
    RETURN convo.switch_branch(p_owner_id, v_conv.id, v_versions[p_sibling_index + 1]);
END;
$$;

-- cancel_prompt cancels a queued (waiting for input or not) or running
-- prompt and its message; the partial reply stays, open blocks end and
-- open tool calls fail, their pending input requests cancelled (so an
-- answer after the cancel gets CV002; an answer before it stays in the
-- log). Cancelling
-- a cancelled prompt is harmless and returns false; cancelling a completed
-- or failed one raises CV002. It notifies "convo_prompts" with
-- 'cancelled:<prompt id>' so the worker stops at once (heartbeat also
-- returns false from now on). Events: (…), promptCancelled, messageUpdated.
CREATE OR REPLACE FUNCTION convo.cancel_prompt(prompt_id uuid) RETURNS boolean
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
    PERFORM convo._notify_prompt('cancelled', v_prompt.id);
    RETURN true;
END;
$$;
