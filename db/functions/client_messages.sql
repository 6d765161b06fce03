-- The client API (what the server calls for its users' requests): sending
-- a message (send_message, and send_messages, many at once), its blocks
-- and files, and the trace context a send carries to the worker.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), in the order of
-- db.FunctionFiles, so a change to a function is an edit here. See
-- db/README.md.

-- _write_user_blocks writes the blocks of user message p_message: its
-- text (a "text" block, when p_text shows something), then one "file"
-- block per file of p_file_ids, in order, each recording that the message
-- holds the file (convo.message_files, which keeps it from the
-- collector). A file block's content is empty; its metadata names the
-- file: {"fileId", "filename", "mediaType", "size", "sha256"}. The file
-- row is locked (FOR KEY SHARE) so that the collector cannot remove it
-- meanwhile.
-- Errors, changing nothing: CV003 a NULL id or a file listed twice; CV001
-- a file that is not p_owner_id's (another user's is not told apart from
-- one that does not exist). Each names the id's index, file_ids[i].
CREATE OR REPLACE FUNCTION convo._write_user_blocks(p_owner_id text, p_message convo.messages, p_text text,
                                                    p_file_ids uuid[], p_action text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_position integer := 0;
    v_file     convo.files;
BEGIN
    IF p_text IS NOT NULL AND convo._has_visible(p_text) THEN
        INSERT INTO convo.blocks (conversation_id, message_id, position, block_type, status, content, ended_at)
        VALUES (p_message.conversation_id, p_message.id, 0, 'text', 'completed', p_text, now());
        v_position := 1;
    END IF;
    FOR i IN 1 .. coalesce(cardinality(p_file_ids), 0) LOOP
        IF p_file_ids[i] IS NULL THEN
            RAISE EXCEPTION '%: file_ids[%] is null', p_action, i - 1 USING ERRCODE = 'CV003';
        END IF;
        IF p_file_ids[i] = ANY (p_file_ids[1:i - 1]) THEN
            RAISE EXCEPTION '%: file_ids[%]: file % is listed twice', p_action, i - 1, p_file_ids[i] USING ERRCODE = 'CV003';
        END IF;
        SELECT * INTO v_file FROM convo.files f WHERE f.id = p_file_ids[i] AND f.owner = p_owner_id FOR KEY SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION '%: file_ids[%]: file % not found (upload it first: POST /v1/files)', p_action, i - 1, p_file_ids[i]
                USING ERRCODE = 'CV001';
        END IF;
        INSERT INTO convo.blocks (conversation_id, message_id, position, block_type, status, content, metadata, ended_at)
        VALUES (p_message.conversation_id, p_message.id, v_position, 'file', 'completed', '',
                jsonb_build_object('fileId', v_file.id, 'filename', v_file.filename, 'mediaType', v_file.media_type,
                                   'size', v_file.size, 'sha256', v_file.sha256), now());
        INSERT INTO convo.message_files (message_id, file_id, position) VALUES (p_message.id, v_file.id, i - 1);
        v_position := v_position + 1;
    END LOOP;
END;
$$;

-- send_message appends a user message (completed at once, one text block)
-- from p_owner_id, its sender (messages.sender_id), to a conversation of
-- which the sender is the owner or a participant, creating the
-- conversation (the sender's own) when
-- p_conversation_id is NULL, and queues one prompt with its pending
-- assistant message for each model configuration in p_model_configs (a JSON
-- array of one object, or two for an A/B comparison, whose messages are
-- slots "a" and "b"). A conversation without a title takes the first line
-- of its first message (_title_from_text). Events: messageCreated (user),
-- then per prompt messageCreated (assistant) and promptQueued, then
-- conversationUpdated.
-- Notifies "convo_prompts" with 'queued:<prompt id>' per prompt, unless
-- the setting convo.notify_prompts is 'off' (send_messages turns it off
-- for its transaction, and notifies once for all its prompts).
--
-- It raises CV004, changing nothing, when the conversation owner's
-- queued and running prompts plus the new ones would exceed
-- convo.limits.max_active_prompts (see _check_prompt_quota); CV001 first
-- for a conversation the sender has no role in, and CV005 for one the
-- sender only views (_check_member), whatever the quota.
--
-- It raises CV002, changing nothing, when a reply of the conversation
-- waits for an answer (wait_prompt): the user answers it, or cancels it,
-- before sending more (a message sent meanwhile would be a turn the
-- waiting reply's model never saw, nor the one after it a reply to it).
--
-- p_parent_message_id, when not NULL, is the message the client shows as
-- the active leaf: the message would hang below it. When the active leaf
-- is another (another tab switched branches, edited, regenerated or sent
-- since the client read the conversation), it raises CV002 naming both,
-- changing nothing: a message the user wrote below one reply never lands
-- below another the user did not see. Either reply of a comparison that
-- ends the path names it. It is checked under the conversation's lock, so
-- no change of the path can come between the check and the insert. A
-- parent without a conversation is CV003. NULL: no check.
--
-- The send policy says what the send does when a reply of the
-- conversation is still queued or running (docs/api.md, "Sending while a
-- reply runs"): the setting convo.send_policy, which send_messages sets
-- for each of its items (as it sets their trace context); unset or '',
-- the conversation's send_policy, and when that is NULL the server's,
-- 'enqueue'.
-- * 'enqueue': the message is written now, its replies wait their turn:
--   the user message and its pending replies are marked queued, their
--   prompts await their turn (not claimable, no notification) until every
--   reply before them ended (_release_turn).
--   A reply waiting for an answer still refuses the send (CV002, above).
-- * 'interrupt': every unfinished prompt of the conversation is cancelled
--   first, as cancel_prompt cancels one (the partial replies stay; queued
--   sends' replies first, so none takes the turn), then the message is
--   sent and answered at once.
-- * 'reject': CV002 "a reply is running: …" naming the prompt, nothing
--   written.
-- Another policy is CV003. Without a reply in flight all three send
-- alike.
CREATE OR REPLACE FUNCTION convo.send_message(p_owner_id text, p_conversation_id uuid, p_text text, p_model_configs jsonb,
                                              p_parent_message_id uuid DEFAULT NULL, p_file_ids uuid[] DEFAULT '{}')
RETURNS TABLE (conversation_id uuid, user_message_id uuid, assistant_message_ids uuid[], prompt_ids uuid[],
               comparison_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv       convo.conversations;
    v_policy     text := nullif(current_setting('convo.send_policy', true), '');
    v_busy       convo.prompts;
    v_queued     boolean := false;
    v_leaf       uuid;
    v_user       convo.messages;
    v_assistant  convo.messages;
    v_prompt     convo.prompts;
    -- The rows of the replies' messages and prompts as written, in slot
    -- order, so that their events need not read them again.
    v_assistants convo.messages[] := '{}';
    v_prompt_rows convo.prompts[] := '{}';
    v_config     jsonb;
    v_slot       integer := 0;
    v_comparison uuid;
    v_messages   uuid[] := '{}';
    v_prompts    uuid[] := '{}';
    v_title      text;
    v_owner      text;
    -- The send's events, appended together at its end (one update of the
    -- conversation's row for all of them, not one each).
    v_kinds      text[] := '{}';
    v_payloads   jsonb[] := '{}';
    v_event_ps   uuid[] := '{}';
BEGIN
    IF (p_text IS NULL OR NOT convo._has_visible(p_text)) AND cardinality(coalesce(p_file_ids, '{}')) = 0 THEN
        RAISE EXCEPTION 'send_message: text must not be empty or only whitespace, control, zero-width, bidi control or blank (U+2800, ...) characters'
            USING ERRCODE = 'CV003';
    END IF;
    -- Expressions, not queries, so that PL/pgSQL evaluates them without
    -- the executor (each query a send runs costs its start-up).
    IF jsonb_typeof(p_model_configs) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_model_configs) NOT BETWEEN 1 AND 2
       OR jsonb_typeof(p_model_configs -> 0) <> 'object'
       OR jsonb_typeof(coalesce(p_model_configs -> 1, '{}')) <> 'object' THEN
        RAISE EXCEPTION 'send_message: model_configs must be a JSON array of one or two objects' USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._json_check(p_model_configs, 'send_message: model_configs');
    IF v_policy NOT IN ('enqueue', 'interrupt', 'reject') THEN
        RAISE EXCEPTION 'send_message: send policy (convo.send_policy) must be enqueue, interrupt or reject, got "%"',
            left(v_policy, 40) USING ERRCODE = 'CV003';
    END IF;
    IF p_parent_message_id IS NOT NULL AND p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'send_message: parentMessageId % names a message of a conversation, and conversationId is not set',
            p_parent_message_id USING ERRCODE = 'CV003';
    END IF;

    -- The caller's role, then the quota (the owner's), before anything is
    -- written or locked.
    IF p_conversation_id IS NOT NULL THEN
        v_owner := convo._check_member(p_owner_id, p_conversation_id, 'send_message', 'participant');
    END IF;
    PERFORM convo._check_prompt_quota(coalesce(v_owner, p_owner_id), jsonb_array_length(p_model_configs), 'send_message');

    IF p_conversation_id IS NULL THEN
        INSERT INTO convo.conversations (owner_id) VALUES (p_owner_id) RETURNING * INTO v_conv;
        -- A new conversation has no messages: no leaf to look up.
    ELSE
        v_conv := convo._conversation_as(p_owner_id, p_conversation_id, 'send_message', 'participant');
        v_policy := coalesce(v_policy, v_conv.send_policy, 'enqueue');
        -- The reply in flight: the one that holds the turn, else the
        -- oldest queued send's.
        SELECT * INTO v_busy FROM convo.prompts p
         WHERE p.conversation_id = v_conv.id AND p.status IN ('queued', 'running')
         ORDER BY p.awaiting_turn, p.created_at, p.id LIMIT 1;
        IF FOUND AND v_policy = 'reject' THEN
            RAISE EXCEPTION 'send_message: a reply is running: prompt % of conversation % is % (send policy reject: wait for it to end, cancel it, or send with policy enqueue or interrupt)',
                v_busy.id, v_conv.id, CASE WHEN v_busy.awaiting_turn THEN 'queued behind another reply'
                                           WHEN v_busy.waiting THEN 'waiting for an answer'
                                           ELSE v_busy.status END
                USING ERRCODE = 'CV002';
        ELSIF FOUND AND v_policy = 'interrupt' THEN
            FOR v_busy IN
                SELECT * FROM convo.prompts p
                 WHERE p.conversation_id = v_conv.id AND p.status IN ('queued', 'running')
                 ORDER BY p.awaiting_turn DESC, p.created_at, p.id
            LOOP
                PERFORM convo._finish_prompt(v_busy.id, 'cancelled', NULL);
                PERFORM convo._notify_prompt('cancelled', v_busy.id);
            END LOOP;
            SELECT * INTO v_conv FROM convo.conversations c WHERE c.id = v_conv.id;
        ELSIF FOUND THEN
            IF EXISTS (SELECT 1 FROM convo.prompts p WHERE p.conversation_id = v_conv.id AND p.waiting) THEN
                RAISE EXCEPTION 'send_message: a reply is waiting for an answer: answer or cancel it'
                    USING ERRCODE = 'CV002';
            END IF;
            v_queued := true;
        END IF;
    END IF;

    -- The message hangs below the active leaf (below slot "a" of a
    -- comparison), its replies below it; the caller's idea of the leaf is
    -- checked here, under the lock _conversation_as took.
    IF p_conversation_id IS NOT NULL THEN
        v_leaf := convo._active_leaf(v_conv.id);
    END IF;
    IF p_parent_message_id IS NOT NULL AND p_parent_message_id IS DISTINCT FROM v_leaf
       AND NOT EXISTS (SELECT 1 FROM convo.messages b JOIN convo.messages a ON a.comparison_id = b.comparison_id
                        WHERE b.id = p_parent_message_id AND b.conversation_id = v_conv.id AND a.id = v_leaf) THEN
        RAISE EXCEPTION 'send_message: parentMessageId % is not the active leaf of conversation %: the active leaf is now % (the conversation changed since it was read: read it again)',
            p_parent_message_id, v_conv.id, coalesce(v_leaf::text, 'none, the conversation has no messages')
            USING ERRCODE = 'CV002';
    END IF;
    INSERT INTO convo.messages (conversation_id, position, role, status, parent_id, queued, sender_id)
    VALUES (v_conv.id, v_conv.last_seq + 1, 'user', 'completed', v_leaf, v_queued, p_owner_id)
    RETURNING * INTO v_user;
    PERFORM convo._write_user_blocks(p_owner_id, v_user, p_text, p_file_ids, 'send_message');
    v_kinds := v_kinds || 'messageCreated'::text;
    v_payloads := v_payloads || jsonb_build_object('message',
        convo._message_json(v_user) || jsonb_build_object('blocks',
            (SELECT jsonb_agg(convo._block_json(b) ORDER BY b.position) FROM convo.blocks b WHERE b.message_id = v_user.id)));
    v_event_ps := v_event_ps || NULL::uuid;

    -- Create every prompt (and the comparison) first, then announce them,
    -- so each message's first event already carries its comparison.
    FOR i IN 0 .. jsonb_array_length(p_model_configs) - 1 LOOP
        v_config := p_model_configs -> i;
        v_slot := v_slot + 1;
        INSERT INTO convo.messages (conversation_id, position, role, status, comparison_slot, parent_id, queued)
        VALUES (v_conv.id, v_user.position + v_slot, 'assistant', 'pending',
                CASE WHEN jsonb_array_length(p_model_configs) = 2 THEN chr(ascii('a') + v_slot - 1) END, v_user.id,
                v_queued)
        RETURNING * INTO v_assistant;
        INSERT INTO convo.prompts (conversation_id, message_id, model_config, trace_context, awaiting_turn)
        VALUES (v_conv.id, v_assistant.id, v_config, convo._trace_context(), v_queued)
        RETURNING * INTO v_prompt;
        v_messages := v_messages || v_assistant.id;
        v_prompts := v_prompts || v_prompt.id;
        v_assistants := v_assistants || v_assistant;
        v_prompt_rows := v_prompt_rows || v_prompt;
    END LOOP;
    IF v_slot = 2 THEN
        INSERT INTO convo.comparisons (conversation_id, user_message_id, prompt_a, prompt_b)
        VALUES (v_conv.id, v_user.id, v_prompts[1], v_prompts[2])
        RETURNING id INTO v_comparison;
        UPDATE convo.messages m SET comparison_id = v_comparison WHERE m.id = ANY (v_messages);
        SELECT array_agg(m ORDER BY m.position) INTO v_assistants FROM convo.messages m WHERE m.id = ANY (v_messages);
    END IF;
    FOR i IN 1 .. v_slot LOOP
        v_assistant := v_assistants[i];
        v_prompt := v_prompt_rows[i];
        v_kinds := v_kinds || ARRAY['messageCreated', 'promptQueued'];
        v_payloads := v_payloads || ARRAY[jsonb_build_object('message', convo._message_json(v_assistant)),
                                          jsonb_build_object('prompt', convo._prompt_json(v_prompt))];
        v_event_ps := v_event_ps || ARRAY[v_prompt.id, v_prompt.id];
        IF NOT v_queued AND current_setting('convo.notify_prompts', true) IS DISTINCT FROM 'off' THEN
            PERFORM convo._notify_prompt('queued', v_prompt.id);
        END IF;
    END LOOP;

    -- Only a conversation without a title takes one (v_conv was read
    -- under its lock): the regular expressions of _title_from_text are
    -- not run for every later message.
    IF v_conv.title = '' THEN
        v_title := convo._title_from_text(p_text);
        IF v_title = '' THEN
            -- A message of files only: its first file's name.
            SELECT convo._title_from_text(b.metadata->>'filename') INTO v_title
              FROM convo.blocks b WHERE b.message_id = v_user.id AND b.block_type = 'file' ORDER BY b.position LIMIT 1;
        END IF;
    END IF;
    -- The same update takes the seqs of the send's events (its
    -- conversationUpdated the last), as _append_events would in an update
    -- of its own.
    UPDATE convo.conversations c
       SET title = CASE WHEN c.title = '' THEN coalesce(v_title, '') ELSE c.title END,
           active_prompt_id = CASE WHEN v_queued THEN c.active_prompt_id ELSE v_prompts[1] END,
           last_message_at = now(),
           updated_at = now(),
           last_seq = c.last_seq + cardinality(v_kinds) + 1
     WHERE c.id = v_conv.id
    RETURNING * INTO v_conv;
    v_kinds := v_kinds || 'conversationUpdated'::text;
    v_payloads := v_payloads || jsonb_build_object('conversation', convo._conversation_json(v_conv));
    v_event_ps := v_event_ps || NULL::uuid;
    INSERT INTO convo.events (conversation_id, seq, kind, prompt_id, payload)
    SELECT v_conv.id, v_conv.last_seq - cardinality(v_kinds) + e.nth, e.kind, e.prompt_id, e.payload
      FROM unnest(v_kinds, v_payloads, v_event_ps) WITH ORDINALITY AS e(kind, payload, prompt_id, nth)
     ORDER BY e.nth;
    IF current_setting('convo.notify_events', true) IS DISTINCT FROM 'off' THEN
        PERFORM convo._notify_event(v_conv.id, v_conv.last_seq);
    END IF;

    RETURN QUERY SELECT v_conv.id, v_user.id, v_messages, v_prompts, v_comparison;
END;
$$;

-- delete_queued_message takes back a queued send before its turn: user
-- message p_message_id, marked queued (send_message's 'enqueue'), goes
-- with its pending replies and their prompts (blocks, files held,
-- comparison too), and the messages below it (the sends queued after it)
-- hang below its parent instead, as delete_message keeps what followed a
-- deleted message. Event: branchSwitched (its fork the message's parent,
-- its messages the path after it: the later queued sends). It returns
-- the conversation.
-- Errors, changing nothing: CV001 a message that does not exist or is not
-- in a conversation the caller has a role in; CV005 a viewer, or a
-- participant taking back another member's message (its sender and the
-- owner may); CV002 a message that is not queued
-- (a reply's message, a message never queued, or one whose reply has
-- started: cancel that reply instead).
CREATE OR REPLACE FUNCTION convo.delete_queued_message(p_owner_id text, p_message_id uuid)
RETURNS convo.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
    v_msg  convo.messages;
    v_leaf uuid;
BEGIN
    SELECT * INTO v_msg FROM convo.messages m WHERE m.id = p_message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'delete_queued_message: message % does not exist', p_message_id USING ERRCODE = 'CV001';
    END IF;
    BEGIN
        v_conv := convo._conversation_as(p_owner_id, v_msg.conversation_id, 'delete_queued_message', 'participant');
    EXCEPTION WHEN SQLSTATE 'CV001' THEN
        -- Another owner's message is not told apart from none.
        RAISE EXCEPTION 'delete_queued_message: message % does not exist', p_message_id USING ERRCODE = 'CV001';
    END;
    -- Again under the lock: its turn may have come meanwhile.
    SELECT * INTO v_msg FROM convo.messages m WHERE m.id = p_message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'delete_queued_message: message % does not exist', p_message_id USING ERRCODE = 'CV001';
    END IF;
    -- A participant takes back only what they sent; the owner anything.
    IF v_conv.owner_id <> p_owner_id AND v_msg.sender_id IS DISTINCT FROM p_owner_id THEN
        RAISE EXCEPTION 'delete_queued_message: message % was sent by another member: only its sender or the conversation''s owner may take it back',
            v_msg.id USING ERRCODE = 'CV005';
    END IF;
    IF v_msg.role <> 'user' THEN
        RAISE EXCEPTION 'delete_queued_message: message % is a reply, not a queued user message: name the user message it answers',
            v_msg.id USING ERRCODE = 'CV002';
    END IF;
    IF NOT v_msg.queued THEN
        RAISE EXCEPTION 'delete_queued_message: message % is not queued: its reply has started (cancel it instead) or it was never queued',
            v_msg.id USING ERRCODE = 'CV002';
    END IF;
    -- A queued send is on the active path (the path does not change while
    -- a reply is in flight) and ends it, or the sends queued after it
    -- follow it. The leaf after: the path's last message not going away.
    SELECT m.id INTO v_leaf FROM convo.messages m
     WHERE m.conversation_id = v_conv.id AND m.on_active_path
       AND m.id <> v_msg.id AND m.parent_id IS DISTINCT FROM v_msg.id
     ORDER BY m.position DESC LIMIT 1;
    UPDATE convo.messages m SET on_active_path = false
     WHERE m.conversation_id = v_conv.id AND m.on_active_path AND m.position >= v_msg.position;
    -- What followed the send (below its replies, slot "a" of a comparison)
    -- hangs below the send's parent.
    UPDATE convo.messages m SET parent_id = v_msg.parent_id
     WHERE m.parent_id IN (SELECT a.id FROM convo.messages a WHERE a.parent_id = v_msg.id);
    DELETE FROM convo.messages m WHERE m.parent_id = v_msg.id;
    DELETE FROM convo.messages m WHERE m.id = v_msg.id;
    PERFORM convo._change_path(v_conv.id, v_leaf);
    SELECT * INTO v_conv FROM convo.conversations c WHERE c.id = v_conv.id;
    RETURN v_conv;
END;
$$;

-- _check_trace_context returns p_value when it is a W3C trace context as
-- a JSON object of strings, {"traceparent": "00-<32 hex>-<16 hex>-<2 hex>",
-- "tracestate": "…"} (tracestate and other propagation fields, such as
-- baggage, optional; 8 kB at most), and '' for NULL or ''. Anything else
-- raises CV003 naming p_field.
CREATE OR REPLACE FUNCTION convo._check_trace_context(p_value text, p_field text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_obj jsonb;
BEGIN
    IF p_value IS NULL OR p_value = '' THEN
        RETURN '';
    END IF;
    IF octet_length(p_value) > 8192 THEN
        RAISE EXCEPTION 'send_messages: % is % bytes; a trace context is 8192 at most', p_field, octet_length(p_value)
            USING ERRCODE = 'CV003';
    END IF;
    BEGIN
        v_obj := p_value::jsonb;
    EXCEPTION WHEN invalid_text_representation THEN
        RAISE EXCEPTION 'send_messages: % is not JSON: %', p_field, left(p_value, 80) USING ERRCODE = 'CV003';
    END;
    IF jsonb_typeof(v_obj) <> 'object'
       OR EXISTS (SELECT 1 FROM jsonb_each(v_obj) e WHERE jsonb_typeof(e.value) <> 'string') THEN
        RAISE EXCEPTION 'send_messages: % must be a JSON object of strings, such as {"traceparent": "00-…"}', p_field
            USING ERRCODE = 'CV003';
    END IF;
    IF coalesce(v_obj ->> 'traceparent', '') !~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$' THEN
        RAISE EXCEPTION 'send_messages: %.traceparent must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>), got %',
            p_field, coalesce(v_obj ->> 'traceparent', 'none') USING ERRCODE = 'CV003';
    END IF;
    RETURN p_value;
END;
$$;

-- _trace_context is the trace context the prompts queued now keep:
-- convo.trace_context, which send_messages sets for each of its items
-- (checked by _check_trace_context), as JSON; NULL when unset or ''.
CREATE OR REPLACE FUNCTION convo._trace_context() RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT nullif(current_setting('convo.trace_context', true), '')::jsonb
$$;

-- send_messages sends many messages in one transaction: item i is
-- send_message(p_owner_ids[i], p_conversation_ids[i], p_texts[i],
-- p_model_configs[i]::jsonb, p_parent_message_ids[i], p_file_ids[i]::uuid[])
-- (a NULL file list: none), each in a subtransaction of its own, in the
-- order of the arrays. It returns one row per item (ord i): its result,
-- with error_code NULL; or, when the item was refused, error_code,
-- error_message and error_detail (the SQLSTATE, message and detail
-- send_message would have raised) and the rest NULL. A refused item wrote
-- nothing (its subtransaction rolled back) and does not stop the others.
-- The server's sender (package postgres) calls it for the SendMessages
-- that arrive together, so that they share one commit.
--
-- p_trace_contexts (optional; NULL: none) gives item i's prompts the W3C
-- trace context p_trace_contexts[i], a JSON object of strings with a
-- "traceparent" (and perhaps "tracestate"), that the workers continue
-- (convo.prompt_trace); NULL or '' for an item: none. A malformed one
-- refuses its item with CV003 naming trace_contexts[i].
--
-- p_policies (optional; NULL: none) gives item i the send policy
-- p_policies[i] ('enqueue', 'interrupt' or 'reject'; NULL or '': the
-- conversation's), as the setting convo.send_policy send_message reads;
-- another refuses its item with CV003 naming policies[i]. The result's
-- queued says an item's replies await their turn (its user message is
-- queued).
--
-- Notifications, sent when the transaction commits: "convo_events" once
-- per conversation an item wrote to, with its last seq, instead of once
-- per event (unless convo.notify_events is 'off'); "convo_prompts" once,
-- 'queued:*', when any item queued a prompt, instead of
-- 'queued:<prompt id>' per prompt.
--
-- Arrays of different lengths are CV003, changing nothing. An error that
-- cannot be caught (a cancelled statement) fails the whole call.
CREATE OR REPLACE FUNCTION convo.send_messages(p_owner_ids text[], p_conversation_ids uuid[], p_texts text[],
                                               p_model_configs text[], p_parent_message_ids uuid[], p_file_ids text[],
                                               p_trace_contexts text[] DEFAULT NULL, p_policies text[] DEFAULT NULL)
RETURNS TABLE (ord integer, conversation_id uuid, user_message_id uuid, assistant_message_ids uuid[],
               prompt_ids uuid[], comparison_id uuid, error_code text, error_message text, error_detail text,
               queued boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_n       integer := coalesce(cardinality(p_owner_ids), 0);
    v_events  text := current_setting('convo.notify_events', true);
    v_prompts text := current_setting('convo.notify_prompts', true);
    v_trace   text := current_setting('convo.trace_context', true);
    v_policy  text := current_setting('convo.send_policy', true);
    v_convs   uuid[] := '{}';
    v_queued  boolean := false;
    v_sent    record;
BEGIN
    IF coalesce(cardinality(p_conversation_ids), 0) <> v_n OR coalesce(cardinality(p_texts), 0) <> v_n
       OR coalesce(cardinality(p_model_configs), 0) <> v_n OR coalesce(cardinality(p_parent_message_ids), 0) <> v_n
       OR coalesce(cardinality(p_file_ids), 0) <> v_n
       OR (p_trace_contexts IS NOT NULL AND cardinality(p_trace_contexts) <> v_n)
       OR (p_policies IS NOT NULL AND cardinality(p_policies) <> v_n) THEN
        RAISE EXCEPTION 'send_messages: the arrays must have one element per message (% owner ids)', v_n
            USING ERRCODE = 'CV003';
    END IF;
    -- The items notify once per conversation and once for all their
    -- prompts, below.
    PERFORM set_config('convo.notify_events', 'off', true);
    PERFORM set_config('convo.notify_prompts', 'off', true);
    FOR i IN 1 .. v_n LOOP
        ord := i;
        BEGIN
            IF p_trace_contexts IS NOT NULL THEN
                -- The item's prompts keep its trace context (_trace_context).
                PERFORM set_config('convo.trace_context',
                                   convo._check_trace_context(p_trace_contexts[i], format('trace_contexts[%s]', i)), true);
            END IF;
            IF p_policies IS NOT NULL THEN
                IF nullif(p_policies[i], '') NOT IN ('enqueue', 'interrupt', 'reject') THEN
                    RAISE EXCEPTION 'send_messages: policies[%] must be enqueue, interrupt or reject, got "%"',
                        i, left(p_policies[i], 40) USING ERRCODE = 'CV003';
                END IF;
                PERFORM set_config('convo.send_policy', coalesce(p_policies[i], ''), true);
            END IF;
            SELECT s.* INTO v_sent
              FROM convo.send_message(p_owner_ids[i], p_conversation_ids[i], p_texts[i], p_model_configs[i]::jsonb,
                                      p_parent_message_ids[i], coalesce(p_file_ids[i], '{}')::uuid[]) s;
            conversation_id := v_sent.conversation_id;
            user_message_id := v_sent.user_message_id;
            assistant_message_ids := v_sent.assistant_message_ids;
            prompt_ids := v_sent.prompt_ids;
            comparison_id := v_sent.comparison_id;
            queued := (SELECT m.queued FROM convo.messages m WHERE m.id = v_sent.user_message_id);
            error_code := NULL;
            error_message := NULL;
            error_detail := NULL;
            v_convs := v_convs || v_sent.conversation_id;
            v_queued := true;
        EXCEPTION WHEN OTHERS THEN
            conversation_id := NULL;
            user_message_id := NULL;
            assistant_message_ids := NULL;
            prompt_ids := NULL;
            comparison_id := NULL;
            queued := NULL;
            GET STACKED DIAGNOSTICS error_code = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                    error_detail = PG_EXCEPTION_DETAIL;
            error_detail := nullif(error_detail, '');
        END;
        RETURN NEXT;
    END LOOP;
    PERFORM set_config('convo.notify_events', coalesce(v_events, ''), true);
    PERFORM set_config('convo.notify_prompts', coalesce(v_prompts, ''), true);
    IF p_trace_contexts IS NOT NULL THEN
        PERFORM set_config('convo.trace_context', coalesce(v_trace, ''), true);
    END IF;
    IF p_policies IS NOT NULL THEN
        PERFORM set_config('convo.send_policy', coalesce(v_policy, ''), true);
    END IF;
    IF v_events IS DISTINCT FROM 'off' THEN
        PERFORM convo._notify_event(c.id, c.last_seq) FROM convo.conversations c WHERE c.id = ANY (v_convs);
    END IF;
    IF v_queued THEN
        PERFORM convo._notify_queued();
    END IF;
END;
$$;
