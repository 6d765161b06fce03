-- The client API: what the server calls for its users' requests.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), so a change to a function is
-- an edit here. See db/README.md.

-- _owned_conversation locks the owner's conversation and returns it,
-- raising CV001 when it does not exist or belongs to someone else (the two
-- are indistinguishable on purpose, so ids cannot be probed).
CREATE OR REPLACE FUNCTION convo._owned_conversation(p_owner_id text, p_conversation_id uuid, p_action text)
RETURNS convo.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
BEGIN
    SELECT * INTO v_conv FROM convo.conversations c
     WHERE c.id = p_conversation_id AND c.owner_id = p_owner_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: conversation % does not exist', p_action, p_conversation_id USING ERRCODE = 'CV001';
    END IF;
    RETURN v_conv;
END;
$$;

-- _check_owner raises CV001, as _owned_conversation does, when the
-- conversation does not exist or belongs to someone else, without locking
-- it. The functions that queue prompts call it before _check_prompt_quota
-- (which must come before the conversation's lock): a request for a
-- conversation the caller cannot see answers CV001 whatever the caller's
-- quota, and costs nothing (not the quota's per-owner lock either).
-- _owned_conversation checks again under the lock (the conversation may
-- be deleted in between).
CREATE OR REPLACE FUNCTION convo._check_owner(p_owner_id text, p_conversation_id uuid, p_action text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM convo.conversations c WHERE c.id = p_conversation_id AND c.owner_id = p_owner_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: conversation % does not exist', p_action, p_conversation_id USING ERRCODE = 'CV001';
    END IF;
END;
$$;

-- _invisible is the inside of a regular expression's bracket expression
-- that matches every character that shows nothing by itself: white space,
-- control characters (Cc), format characters (Cf: the zero-width
-- characters U+200B-U+200D, U+2060, U+FEFF, the bidi controls U+200E,
-- U+200F, U+202A-U+202E, U+2066-U+2069, the soft hyphen, ...), variation
-- selectors, the other default-ignorable code points (Hangul fillers,
-- tag characters, ...), and the blank symbols U+2800 (BRAILLE PATTERN
-- BLANK) and U+1D159 (MUSICAL SYMBOL NULL NOTEHEAD). wire.Invisible
-- (wire/validate.go) is the same set: TestVisibleAsInGo checks that the
-- two agree on every code point.
CREATE OR REPLACE FUNCTION convo._invisible() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT '\u0001-\u0020\u007F-\u00A0\u00AD\u034F\u0600-\u0605\u061C\u06DD\u070F\u0890-\u0891\u08E2\u115F-\u1160\u1680\u17B4-\u17B5\u180B-\u180F\u2000-\u200F\u2028-\u202F\u205F-\u206F\u2800\u3000\u3164\uFE00-\uFE0F\uFEFF\uFFA0\uFFF0-\uFFFB\U000110BD\U000110CD\U00013430-\U0001343F\U0001BCA0-\U0001BCA3\U0001D159\U0001D173-\U0001D17A\U000E0000-\U000E0FFF'::text
$$;

-- _has_visible reports whether p_text has a character that shows
-- something (one that is not in _invisible).
CREATE OR REPLACE FUNCTION convo._has_visible(p_text text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_text ~ ('[^' || convo._invisible() || ']')
$$;

-- _title_from_text is the title a conversation takes from its first
-- message: the first line with something visible, its control characters
-- (TAB, ESC, ...) made spaces, cut at 80 characters, and what shows
-- nothing trimmed from both ends; '' when there is none.
CREATE OR REPLACE FUNCTION convo._title_from_text(p_text text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce((
        SELECT regexp_replace(
                   left(regexp_replace(regexp_replace(l.line, '[\u0001-\u001F\u007F-\u009F]', ' ', 'g'),
                                       '^[' || convo._invisible() || ']+', ''), 80),
                   '[' || convo._invisible() || ']+$', '')
          FROM regexp_split_to_table(p_text, '[\n\r\u0085\u2028\u2029]') WITH ORDINALITY AS l(line, n)
         WHERE convo._has_visible(l.line)
         ORDER BY l.n LIMIT 1), '')
$$;

-- _check_title raises CV003 unless the title is 1 to 200 characters of one
-- line (no control character: CR, LF, TAB, ESC, BEL, DEL, C1; no line or
-- paragraph separator U+2028, U+2029) with something visible, or empty
-- when allowed. wire.CheckTitle is the same rule.
CREATE OR REPLACE FUNCTION convo._check_title(p_title text, p_allow_empty boolean) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_title IS NULL OR (NOT p_allow_empty AND p_title = '') THEN
        RAISE EXCEPTION 'title must not be empty' USING ERRCODE = 'CV003';
    END IF;
    IF p_title ~ '[\u0001-\u001F\u007F-\u009F\u2028\u2029]' THEN
        RAISE EXCEPTION 'title must not contain control characters (CR, LF, TAB, ESC, ...) or line or paragraph separators (U+2028, U+2029): a title is one line of text'
            USING ERRCODE = 'CV003';
    END IF;
    IF p_title <> '' AND NOT convo._has_visible(p_title) THEN
        RAISE EXCEPTION 'title must not be empty or only whitespace, zero-width, bidi control or blank (U+2800, ...) characters'
            USING ERRCODE = 'CV003';
    END IF;
    IF length(p_title) > 200 THEN
        RAISE EXCEPTION 'title must be at most 200 characters, got %', length(p_title) USING ERRCODE = 'CV003';
    END IF;
END;
$$;

-- create_conversation creates an empty conversation for the owner. It has
-- no events yet: its log starts with the first change.
CREATE OR REPLACE FUNCTION convo.create_conversation(p_owner_id text, p_title text) RETURNS convo.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
BEGIN
    PERFORM convo._check_title(p_title, true);
    INSERT INTO convo.conversations (owner_id, title) VALUES (p_owner_id, btrim(p_title))
    RETURNING * INTO v_conv;
    RETURN v_conv;
END;
$$;

-- rename_conversation sets the title. Event: conversationUpdated.
CREATE OR REPLACE FUNCTION convo.rename_conversation(p_owner_id text, p_conversation_id uuid, p_title text)
RETURNS convo.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
BEGIN
    PERFORM convo._check_title(p_title, false);
    PERFORM convo._owned_conversation(p_owner_id, p_conversation_id, 'rename_conversation');
    UPDATE convo.conversations SET title = btrim(p_title), updated_at = now()
     WHERE id = p_conversation_id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'conversationUpdated',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));
    SELECT * INTO v_conv FROM convo.conversations WHERE id = p_conversation_id;
    RETURN v_conv;
END;
$$;

-- clear_conversation removes every message (with its prompts, blocks, tool
-- calls and comparisons) and keeps the conversation and its event log.
-- Prompts still queued or running are cancelled first, so their workers
-- stop. Events: (the cancellations' events), historyCleared.
CREATE OR REPLACE FUNCTION convo.clear_conversation(p_owner_id text, p_conversation_id uuid)
RETURNS convo.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv   convo.conversations;
    v_prompt uuid;
BEGIN
    PERFORM convo._owned_conversation(p_owner_id, p_conversation_id, 'clear_conversation');
    FOR v_prompt IN
        SELECT p.id FROM convo.prompts p
         WHERE p.conversation_id = p_conversation_id AND p.status IN ('queued', 'running')
         ORDER BY p.created_at
    LOOP
        PERFORM convo._finish_prompt(v_prompt, 'cancelled', NULL);
        PERFORM convo._notify_prompt('cancelled', v_prompt);
    END LOOP;
    DELETE FROM convo.messages WHERE conversation_id = p_conversation_id;
    UPDATE convo.conversations SET active_prompt_id = NULL, updated_at = now()
     WHERE id = p_conversation_id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'historyCleared',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));
    SELECT * INTO v_conv FROM convo.conversations WHERE id = p_conversation_id;
    RETURN v_conv;
END;
$$;

-- delete_conversation deletes the conversation and everything in it,
-- cancelling its running prompts' workers, and notifies "convo_events" with
-- '<conversation id>:deleted' so that subscribers are ended.
CREATE OR REPLACE FUNCTION convo.delete_conversation(p_owner_id text, p_conversation_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt uuid;
BEGIN
    PERFORM convo._owned_conversation(p_owner_id, p_conversation_id, 'delete_conversation');
    FOR v_prompt IN
        SELECT p.id FROM convo.prompts p
         WHERE p.conversation_id = p_conversation_id AND p.status IN ('queued', 'running')
    LOOP
        PERFORM convo._notify_prompt('cancelled', v_prompt);
    END LOOP;
    DELETE FROM convo.conversations WHERE id = p_conversation_id;
    PERFORM convo._notify_deleted(p_conversation_id);
END;
$$;

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
-- to the owner's conversation, creating the conversation when
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
-- It raises CV004, changing nothing, when the owner's queued and running
-- prompts plus the new ones would exceed convo.limits.max_active_prompts
-- (see _check_prompt_quota); CV001 first for a conversation that is not
-- the owner's (_check_owner), whatever the quota.
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
CREATE OR REPLACE FUNCTION convo.send_message(p_owner_id text, p_conversation_id uuid, p_text text, p_model_configs jsonb,
                                              p_parent_message_id uuid DEFAULT NULL, p_file_ids uuid[] DEFAULT '{}')
RETURNS TABLE (conversation_id uuid, user_message_id uuid, assistant_message_ids uuid[], prompt_ids uuid[],
               comparison_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_conv       convo.conversations;
    v_leaf       uuid;
    v_user       convo.messages;
    v_assistant  convo.messages;
    v_prompt     convo.prompts;
    v_config     jsonb;
    v_slot       integer := 0;
    v_comparison uuid;
    v_messages   uuid[] := '{}';
    v_prompts    uuid[] := '{}';
    v_title      text;
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
    IF jsonb_typeof(p_model_configs) IS DISTINCT FROM 'array'
       OR jsonb_array_length(p_model_configs) NOT BETWEEN 1 AND 2
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_model_configs) c WHERE jsonb_typeof(c.value) <> 'object') THEN
        RAISE EXCEPTION 'send_message: model_configs must be a JSON array of one or two objects' USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._json_check(p_model_configs, 'send_message: model_configs');
    IF p_parent_message_id IS NOT NULL AND p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'send_message: parentMessageId % names a message of a conversation, and conversationId is not set',
            p_parent_message_id USING ERRCODE = 'CV003';
    END IF;

    -- The owner, then the quota, before anything is written or locked.
    IF p_conversation_id IS NOT NULL THEN
        PERFORM convo._check_owner(p_owner_id, p_conversation_id, 'send_message');
    END IF;
    PERFORM convo._check_prompt_quota(p_owner_id, jsonb_array_length(p_model_configs), 'send_message');

    IF p_conversation_id IS NULL THEN
        INSERT INTO convo.conversations (owner_id) VALUES (p_owner_id) RETURNING * INTO v_conv;
    ELSE
        v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'send_message');
        IF EXISTS (SELECT 1 FROM convo.prompts p WHERE p.conversation_id = v_conv.id AND p.waiting) THEN
            RAISE EXCEPTION 'send_message: a reply is waiting for an answer: answer or cancel it'
                USING ERRCODE = 'CV002';
        END IF;
    END IF;

    -- The message hangs below the active leaf (below slot "a" of a
    -- comparison), its replies below it; the caller's idea of the leaf is
    -- checked here, under the lock _owned_conversation took.
    v_leaf := convo._active_leaf(v_conv.id);
    IF p_parent_message_id IS NOT NULL AND p_parent_message_id IS DISTINCT FROM v_leaf
       AND NOT EXISTS (SELECT 1 FROM convo.messages b JOIN convo.messages a ON a.comparison_id = b.comparison_id
                        WHERE b.id = p_parent_message_id AND b.conversation_id = v_conv.id AND a.id = v_leaf) THEN
        RAISE EXCEPTION 'send_message: parentMessageId % is not the active leaf of conversation %: the active leaf is now % (the conversation changed since it was read: read it again)',
            p_parent_message_id, v_conv.id, coalesce(v_leaf::text, 'none, the conversation has no messages')
            USING ERRCODE = 'CV002';
    END IF;
    INSERT INTO convo.messages (conversation_id, position, role, status, parent_id)
    VALUES (v_conv.id, v_conv.last_seq + 1, 'user', 'completed', v_leaf)
    RETURNING * INTO v_user;
    PERFORM convo._write_user_blocks(p_owner_id, v_user, p_text, p_file_ids, 'send_message');
    v_kinds := v_kinds || 'messageCreated'::text;
    v_payloads := v_payloads || jsonb_build_object('message',
        convo._message_json(v_user) || jsonb_build_object('blocks',
            (SELECT jsonb_agg(convo._block_json(b) ORDER BY b.position) FROM convo.blocks b WHERE b.message_id = v_user.id)));
    v_event_ps := v_event_ps || NULL::uuid;

    -- Create every prompt (and the comparison) first, then announce them,
    -- so each message's first event already carries its comparison.
    FOR v_config IN SELECT c.value FROM jsonb_array_elements(p_model_configs) c LOOP
        v_slot := v_slot + 1;
        INSERT INTO convo.messages (conversation_id, position, role, status, comparison_slot, parent_id)
        VALUES (v_conv.id, v_user.position + v_slot, 'assistant', 'pending',
                CASE WHEN jsonb_array_length(p_model_configs) = 2 THEN chr(ascii('a') + v_slot - 1) END, v_user.id)
        RETURNING * INTO v_assistant;
        INSERT INTO convo.prompts (conversation_id, message_id, model_config, trace_context)
        VALUES (v_conv.id, v_assistant.id, v_config, convo._trace_context())
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
        v_kinds := v_kinds || ARRAY['messageCreated', 'promptQueued'];
        v_payloads := v_payloads || ARRAY[jsonb_build_object('message', convo._message_json(v_assistant)),
                                          jsonb_build_object('prompt', convo._prompt_json(v_prompt))];
        v_event_ps := v_event_ps || ARRAY[v_prompt.id, v_prompt.id];
        IF current_setting('convo.notify_prompts', true) IS DISTINCT FROM 'off' THEN
            PERFORM convo._notify_prompt('queued', v_prompt.id);
        END IF;
    END LOOP;

    -- Only a conversation without a title takes one (v_conv was read
    -- under its lock): the regular expressions of _title_from_text are a
    -- tenth of a send's time, not spent on every later message.
    IF v_conv.title = '' THEN
        v_title := convo._title_from_text(p_text);
        IF v_title = '' THEN
            -- A message of files only: its first file's name.
            SELECT convo._title_from_text(b.metadata->>'filename') INTO v_title
              FROM convo.blocks b WHERE b.message_id = v_user.id AND b.block_type = 'file' ORDER BY b.position LIMIT 1;
        END IF;
    END IF;
    UPDATE convo.conversations c
       SET title = CASE WHEN c.title = '' THEN coalesce(v_title, '') ELSE c.title END,
           active_prompt_id = v_prompts[1],
           last_message_at = now(),
           updated_at = now()
     WHERE c.id = v_conv.id
    RETURNING * INTO v_conv;
    v_kinds := v_kinds || 'conversationUpdated'::text;
    v_payloads := v_payloads || jsonb_build_object('conversation', convo._conversation_json(v_conv));
    v_event_ps := v_event_ps || NULL::uuid;
    PERFORM convo._append_events(v_conv.id, v_kinds, v_payloads, v_event_ps,
                                 array_fill(NULL::uuid, ARRAY[cardinality(v_kinds)]),
                                 array_fill(NULL::uuid, ARRAY[cardinality(v_kinds)]));

    RETURN QUERY SELECT v_conv.id, v_user.id, v_messages, v_prompts, v_comparison;
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
                                               p_trace_contexts text[] DEFAULT NULL)
RETURNS TABLE (ord integer, conversation_id uuid, user_message_id uuid, assistant_message_ids uuid[],
               prompt_ids uuid[], comparison_id uuid, error_code text, error_message text, error_detail text)
LANGUAGE plpgsql AS $$
DECLARE
    v_n       integer := coalesce(cardinality(p_owner_ids), 0);
    v_events  text := current_setting('convo.notify_events', true);
    v_prompts text := current_setting('convo.notify_prompts', true);
    v_trace   text := current_setting('convo.trace_context', true);
    v_convs   uuid[] := '{}';
    v_queued  boolean := false;
    v_sent    record;
BEGIN
    IF coalesce(cardinality(p_conversation_ids), 0) <> v_n OR coalesce(cardinality(p_texts), 0) <> v_n
       OR coalesce(cardinality(p_model_configs), 0) <> v_n OR coalesce(cardinality(p_parent_message_ids), 0) <> v_n
       OR coalesce(cardinality(p_file_ids), 0) <> v_n
       OR (p_trace_contexts IS NOT NULL AND cardinality(p_trace_contexts) <> v_n) THEN
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
            SELECT s.* INTO v_sent
              FROM convo.send_message(p_owner_ids[i], p_conversation_ids[i], p_texts[i], p_model_configs[i]::jsonb,
                                      p_parent_message_ids[i], coalesce(p_file_ids[i], '{}')::uuid[]) s;
            conversation_id := v_sent.conversation_id;
            user_message_id := v_sent.user_message_id;
            assistant_message_ids := v_sent.assistant_message_ids;
            prompt_ids := v_sent.prompt_ids;
            comparison_id := v_sent.comparison_id;
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
    IF v_events IS DISTINCT FROM 'off' THEN
        PERFORM convo._notify_event(c.id, c.last_seq) FROM convo.conversations c WHERE c.id = ANY (v_convs);
    END IF;
    IF v_queued THEN
        PERFORM convo._notify_queued();
    END IF;
END;
$$;

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
-- JSON object; CV001 an unknown conversation (or another owner's: before
-- the quota, _check_owner); CV004 past the owner's cap
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
    -- The owner, then the quota, before the conversation is locked (see
    -- _check_owner, _check_prompt_quota).
    PERFORM convo._check_owner(p_owner_id, p_conversation_id, 'regenerate_reply');
    PERFORM convo._check_prompt_quota(p_owner_id, 1, 'regenerate_reply');
    v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'regenerate_reply');

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
-- (or another owner's: before the quota, _check_owner); CV004 past the
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
    PERFORM convo._check_owner(p_owner_id, p_conversation_id, 'edit_message');
    PERFORM convo._check_prompt_quota(p_owner_id, 1, 'edit_message');
    v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'edit_message');

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

    INSERT INTO convo.messages (conversation_id, position, role, status, parent_id, on_active_path)
    VALUES (v_conv.id, v_conv.last_seq + 1, 'user', 'completed', v_old.parent_id, false)
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
    v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'switch_branch');
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
-- switch_branch; CV001 an unknown conversation (or another owner's), or
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
    PERFORM convo._check_owner(p_owner_id, p_conversation_id, 'send_after');
    PERFORM convo._check_prompt_quota(p_owner_id, 1, 'send_after');
    v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'send_after');
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
    v_conv := convo._owned_conversation(p_owner_id, p_conversation_id, 'switch_version');
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

-- set_feedback rates an assistant message of the owner ('up' or 'down',
-- with an optional comment); a second rating replaces the first. Event:
-- messageUpdated.
CREATE OR REPLACE FUNCTION convo.set_feedback(p_owner_id text, p_message_id uuid, p_rating text, p_comment text)
RETURNS convo.messages
LANGUAGE plpgsql AS $$
DECLARE
    v_message convo.messages;
BEGIN
    IF p_rating IS NULL OR p_rating NOT IN ('up', 'down') THEN
        RAISE EXCEPTION 'set_feedback: rating must be up or down' USING ERRCODE = 'CV003';
    END IF;
    IF length(coalesce(p_comment, '')) > 2000 THEN
        RAISE EXCEPTION 'set_feedback: comment must be at most 2000 characters' USING ERRCODE = 'CV003';
    END IF;
    SELECT m.* INTO v_message FROM convo.messages m
      JOIN convo.conversations c ON c.id = m.conversation_id
     WHERE m.id = p_message_id AND c.owner_id = p_owner_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'set_feedback: message % does not exist', p_message_id USING ERRCODE = 'CV001';
    END IF;
    PERFORM convo._lock_conversation(v_message.conversation_id);
    IF v_message.role <> 'assistant' THEN
        RAISE EXCEPTION 'set_feedback: message % is a % message; only assistant messages take feedback',
            p_message_id, v_message.role USING ERRCODE = 'CV002';
    END IF;
    UPDATE convo.messages
       SET feedback_rating = p_rating, feedback_comment = coalesce(p_comment, ''), feedback_at = now(), updated_at = now()
     WHERE id = p_message_id
    RETURNING * INTO v_message;
    PERFORM convo._append_event(v_message.conversation_id, 'messageUpdated',
        jsonb_build_object('message', convo._message_json(v_message)));
    RETURN v_message;
END;
$$;

-- vote_comparison records the owner's preference ('a', 'b' or 'tie') in a
-- comparison; a second vote replaces the first. Votes are not conversation
-- events: they change no message, prompt or block.
CREATE OR REPLACE FUNCTION convo.vote_comparison(p_owner_id text, p_comparison_id uuid, p_preference text)
RETURNS convo.comparisons
LANGUAGE plpgsql AS $$
DECLARE
    v_comparison convo.comparisons;
BEGIN
    IF p_preference IS NULL OR p_preference NOT IN ('a', 'b', 'tie') THEN
        RAISE EXCEPTION 'vote_comparison: preference must be a, b or tie' USING ERRCODE = 'CV003';
    END IF;
    UPDATE convo.comparisons cmp
       SET preference = p_preference, voted_at = now()
      FROM convo.conversations c
     WHERE cmp.id = p_comparison_id AND c.id = cmp.conversation_id AND c.owner_id = p_owner_id
    RETURNING cmp.* INTO v_comparison;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'vote_comparison: comparison % does not exist', p_comparison_id USING ERRCODE = 'CV001';
    END IF;
    RETURN v_comparison;
END;
$$;

-- _owned_input returns the owner's input request, raising CV001 when it
-- does not exist or belongs to another owner's conversation (the two are
-- indistinguishable on purpose). It takes no lock.
CREATE OR REPLACE FUNCTION convo._owned_input(p_owner_id text, p_tool_call_id uuid, p_action text)
RETURNS convo.input_requests
LANGUAGE plpgsql AS $$
DECLARE
    v_request convo.input_requests;
BEGIN
    SELECT r.* INTO v_request FROM convo.input_requests r
      JOIN convo.conversations c ON c.id = r.conversation_id
     WHERE r.tool_call_id = p_tool_call_id AND c.owner_id = p_owner_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: input request % does not exist', p_action, p_tool_call_id USING ERRCODE = 'CV001';
    END IF;
    RETURN v_request;
END;
$$;

-- _pending_input locks the request's conversation and returns the request
-- as it now is, raising CV002, with a message naming its state, unless it
-- is pending and not past its expires_at (one past it is refused as
-- expired, though expire_leases has not written the expiry yet).
CREATE OR REPLACE FUNCTION convo._pending_input(p_request convo.input_requests, p_action text)
RETURNS convo.input_requests
LANGUAGE plpgsql AS $$
DECLARE
    v_request convo.input_requests;
BEGIN
    PERFORM convo._lock_conversation(p_request.conversation_id);
    SELECT * INTO v_request FROM convo.input_requests r WHERE r.tool_call_id = p_request.tool_call_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: input request % does not exist', p_action, p_request.tool_call_id USING ERRCODE = 'CV001';
    END IF;
    CASE v_request.status
    WHEN 'answered' THEN
        RAISE EXCEPTION '%: input request % was already answered at %', p_action, v_request.tool_call_id,
            convo._ts(v_request.answered_at) USING ERRCODE = 'CV002';
    WHEN 'expired' THEN
        RAISE EXCEPTION '%: input request % expired at %', p_action, v_request.tool_call_id,
            convo._ts(v_request.answered_at) USING ERRCODE = 'CV002';
    WHEN 'cancelled' THEN
        RAISE EXCEPTION '%: input request % was cancelled at % (its tool call or prompt ended)', p_action,
            v_request.tool_call_id, convo._ts(v_request.answered_at) USING ERRCODE = 'CV002';
    ELSE
        IF v_request.expires_at <= now() THEN
            RAISE EXCEPTION '%: input request % expired at %', p_action, v_request.tool_call_id,
                convo._ts(v_request.expires_at) USING ERRCODE = 'CV002';
        END IF;
    END CASE;
    RETURN v_request;
END;
$$;

-- _check_input_answer raises CV003, naming the field, unless answer is an
-- answer of the request's kind: approval {"approved": boolean, "reason":
-- text (optional)}; client_tool {"output": text} or {"error": text (not
-- empty)}, and when the request has an outputSchema with a "type" (a
-- name or an array of names), output must be JSON whose top-level type is
-- one of them ("integer": a number without a fraction); nothing else of
-- the schema is checked, except that output under any outputSchema that
-- parses as JSON keeps convo's rule for JSON (_json_check); question
-- {"answer": text that shows something}, one of the request's choices
-- when it has some.
CREATE OR REPLACE FUNCTION convo._check_input_answer(p_kind text, p_request jsonb, p_answer jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_keys   text[] := CASE p_kind WHEN 'approval' THEN ARRAY['approved', 'reason']
                                   WHEN 'client_tool' THEN ARRAY['output', 'error']
                                   ELSE ARRAY['answer'] END;
    v_key    text;
    v_type   jsonb := p_request->'outputSchema'->'type';
    v_types  text[];
    v_output jsonb;
BEGIN
    IF jsonb_typeof(p_answer) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'answer_input: answer must be a JSON object, got %', coalesce(jsonb_typeof(p_answer), 'NULL')
            USING ERRCODE = 'CV003';
    END IF;
    SELECT k INTO v_key FROM jsonb_object_keys(p_answer) k WHERE k <> ALL (v_keys) ORDER BY k LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'answer_input: the answer to a % request takes %, not "%"', p_kind,
            array_to_string(v_keys, ', '), v_key USING ERRCODE = 'CV003';
    END IF;
    CASE p_kind
    WHEN 'approval' THEN
        IF jsonb_typeof(p_answer->'approved') IS DISTINCT FROM 'boolean' THEN
            RAISE EXCEPTION 'answer_input: answer.approved must be true or false' USING ERRCODE = 'CV003';
        END IF;
        IF p_answer ? 'reason' AND jsonb_typeof(p_answer->'reason') <> 'string' THEN
            RAISE EXCEPTION 'answer_input: answer.reason must be a text' USING ERRCODE = 'CV003';
        END IF;
    WHEN 'client_tool' THEN
        IF (p_answer ? 'output') = (p_answer ? 'error') THEN
            RAISE EXCEPTION 'answer_input: the answer to a client_tool request has either output or error'
                USING ERRCODE = 'CV003';
        END IF;
        IF p_answer ? 'error' AND (jsonb_typeof(p_answer->'error') <> 'string' OR NOT convo._has_visible(p_answer->>'error')) THEN
            RAISE EXCEPTION 'answer_input: answer.error must be a text that shows something' USING ERRCODE = 'CV003';
        END IF;
        IF p_answer ? 'output' THEN
            IF jsonb_typeof(p_answer->'output') <> 'string' THEN
                RAISE EXCEPTION 'answer_input: answer.output must be a text (the tool''s output), got %',
                    jsonb_typeof(p_answer->'output') USING ERRCODE = 'CV003';
            END IF;
            IF p_request ? 'outputSchema' THEN
                -- Output held to a schema is JSON: it keeps convo's rule
                -- for JSON values as any stored value does.
                BEGIN
                    v_output := (p_answer->>'output')::jsonb;
                EXCEPTION WHEN numeric_value_out_of_range THEN
                    RAISE EXCEPTION 'answer_input: answer.output: a number is outside the range of a 64-bit float (%)', SQLERRM
                        USING ERRCODE = 'CV003';
                WHEN untranslatable_character THEN
                    RAISE EXCEPTION 'answer_input: answer.output: % (%)', SQLERRM, 'JSON text must not hold \u0000'
                        USING ERRCODE = 'CV003';
                WHEN invalid_text_representation THEN
                    IF v_type IS NOT NULL THEN
                        RAISE EXCEPTION 'answer_input: answer.output must be JSON (the request''s outputSchema has type %): %', v_type, SQLERRM
                            USING ERRCODE = 'CV003';
                    END IF;
                END;
                PERFORM convo._json_check(v_output, 'answer_input: answer.output');
            END IF;
            IF v_type IS NOT NULL THEN
                v_types := CASE jsonb_typeof(v_type)
                    WHEN 'string' THEN ARRAY[v_type #>> '{}']
                    WHEN 'array' THEN ARRAY(SELECT jsonb_array_elements_text(v_type)) END;
                IF v_types IS NOT NULL AND NOT (jsonb_typeof(v_output) = ANY (v_types)
                        OR ('integer' = ANY (v_types) AND jsonb_typeof(v_output) = 'number'
                            AND v_output::text::numeric = trunc(v_output::text::numeric))) THEN
                    RAISE EXCEPTION 'answer_input: answer.output is JSON of type %, and the request''s outputSchema wants %',
                        jsonb_typeof(v_output), v_type USING ERRCODE = 'CV003';
                END IF;
            END IF;
        END IF;
    ELSE
        IF jsonb_typeof(p_answer->'answer') IS DISTINCT FROM 'string' OR NOT convo._has_visible(p_answer->>'answer') THEN
            RAISE EXCEPTION 'answer_input: answer.answer must be a text that shows something' USING ERRCODE = 'CV003';
        END IF;
        IF p_request ? 'choices' AND NOT p_request->'choices' @> jsonb_build_array(p_answer->'answer') THEN
            RAISE EXCEPTION 'answer_input: answer.answer must be one of the choices %', p_request->'choices'
                USING ERRCODE = 'CV003';
        END IF;
    END CASE;
END;
$$;

-- answer_input answers the owner's pending input request: the first answer
-- wins, under the conversation's lock. The answer's shape depends on the
-- request's kind (see _check_input_answer; CV003 naming the field
-- otherwise). A client_tool request needs no claim (claim_input) to be
-- answered: the claim keeps two tabs from running the tool twice, and a
-- tab that ran it must be able to hand in its output even if its claim
-- lapsed meanwhile; the first answer wins all the same. When the request's
-- prompt waits (wait_prompt) and no request of it is pending any more,
-- the prompt is queued again (claimable; notifies "convo_prompts" with
-- 'queued:<prompt id>'). It returns the request as answered. CV001 for an
-- unknown or foreign request; CV002, changing nothing, for one answered
-- already, expired or cancelled (the message names which, and when).
-- Event: inputAnswered.
CREATE OR REPLACE FUNCTION convo.answer_input(p_owner_id text, p_tool_call_id uuid, p_answer jsonb)
RETURNS convo.input_requests
LANGUAGE plpgsql AS $$
DECLARE
    v_request convo.input_requests;
BEGIN
    PERFORM convo._json_check(p_answer, 'answer_input: answer');
    v_request := convo._owned_input(p_owner_id, p_tool_call_id, 'answer_input');
    PERFORM convo._check_input_answer(v_request.kind, v_request.request, p_answer);
    v_request := convo._pending_input(v_request, 'answer_input');
    UPDATE convo.input_requests r
       SET status = 'answered', answer = p_answer, answered_at = now()
     WHERE r.tool_call_id = v_request.tool_call_id
    RETURNING * INTO v_request;
    PERFORM convo._input_answered(v_request);
    PERFORM convo._resume_prompt(v_request.prompt_id);
    RETURN v_request;
END;
$$;

-- claim_input claims the owner's pending client_tool request for claimant
-- (a browser tab) for lease_seconds (1 to 3600), so that exactly one tab
-- runs the tool: it succeeds when the request is unclaimed, its claim
-- lapsed, or claimant holds it (a renewal, which a tab makes while the
-- tool runs). It returns the request as claimed. CV003 for an empty
-- claimant or a lease out of range; CV001 for an unknown or foreign
-- request; CV002, changing nothing, for a request that is not a
-- client_tool one, not pending (as answer_input), or held by another
-- claimant (the message names it and until when). Event: inputClaimed.
CREATE OR REPLACE FUNCTION convo.claim_input(p_owner_id text, p_tool_call_id uuid, p_claimant text,
                                             p_lease_seconds integer)
RETURNS convo.input_requests
LANGUAGE plpgsql AS $$
DECLARE
    v_request convo.input_requests;
BEGIN
    IF p_claimant IS NULL OR p_claimant = '' THEN
        RAISE EXCEPTION 'claim_input: claimant must be a non-empty name' USING ERRCODE = 'CV003';
    END IF;
    IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 3600 THEN
        RAISE EXCEPTION 'claim_input: lease_seconds must be between 1 and 3600, got %', p_lease_seconds
            USING ERRCODE = 'CV003';
    END IF;
    v_request := convo._owned_input(p_owner_id, p_tool_call_id, 'claim_input');
    IF v_request.kind <> 'client_tool' THEN
        RAISE EXCEPTION 'claim_input: input request % is a % request; only client_tool requests are claimed',
            v_request.tool_call_id, v_request.kind USING ERRCODE = 'CV002';
    END IF;
    v_request := convo._pending_input(v_request, 'claim_input');
    IF v_request.claimed_by IS DISTINCT FROM p_claimant AND v_request.claim_expires_at > now() THEN
        RAISE EXCEPTION 'claim_input: input request % is claimed by % until %', v_request.tool_call_id,
            v_request.claimed_by, convo._ts(v_request.claim_expires_at) USING ERRCODE = 'CV002';
    END IF;
    UPDATE convo.input_requests r
       SET claimed_by = p_claimant, claim_expires_at = now() + make_interval(secs => p_lease_seconds)
     WHERE r.tool_call_id = v_request.tool_call_id
    RETURNING * INTO v_request;
    PERFORM convo._input_event(v_request, 'inputClaimed', jsonb_build_object(
        'toolCallId', v_request.tool_call_id, 'promptId', v_request.prompt_id,
        'claimedBy', v_request.claimed_by, 'claimExpiresAt', convo._ts(v_request.claim_expires_at)));
    RETURN v_request;
END;
$$;
