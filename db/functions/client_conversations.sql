-- The client API (what the server calls for its users' requests):
-- conversations, created, renamed, cleared and deleted, the role checks
-- every client function makes, and the rules of a title and of visible
-- text.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), in the order of
-- db.FunctionFiles, so a change to a function is an edit here. See
-- db/README.md.

-- Roles (docs/api.md, "Members"): a conversation's owner
-- (conversations.owner_id) may do anything; a participant (a row of
-- convo.members) reads and writes as the owner does (sends, edits,
-- regenerations, switches, cancels, answers, feedback, votes) but cannot
-- rename, clear or delete it nor change its members; a viewer reads only.
-- Every client function names the role its action needs, and the caller
-- is checked against it (_conversation_as, _check_role): a caller with no
-- role (a stranger, a removed member) is CV001 as for a conversation that
-- does not exist (the two are indistinguishable on purpose, so ids
-- cannot be probed); a caller whose role is below the action's is CV005,
-- naming the role and the action.

-- _role_rank orders the roles: what a role may do, a higher one may too.
-- NULL (no role) ranks below every role.
CREATE OR REPLACE FUNCTION convo._role_rank(p_role text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_role WHEN 'viewer' THEN 1 WHEN 'participant' THEN 2 WHEN 'owner' THEN 3 ELSE 0 END
$$;

-- member_role is p_user_id's role in the conversation: 'owner',
-- 'participant', 'viewer', or NULL (a stranger, or no such conversation).
-- The Go store's reads filter on it (db/queries).
CREATE OR REPLACE FUNCTION convo.member_role(p_user_id text, p_conversation_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN c.owner_id = p_user_id THEN 'owner'
                ELSE (SELECT m.role FROM convo.members m
                       WHERE m.conversation_id = c.id AND m.user_id = p_user_id) END
      FROM convo.conversations c
     WHERE c.id = p_conversation_id
$$;

-- _check_role raises CV001 when p_role is NULL (the caller has no role in
-- the conversation) and CV005 when it ranks below p_need, naming both.
CREATE OR REPLACE FUNCTION convo._check_role(p_role text, p_conversation_id uuid, p_action text, p_need text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_role IS NULL THEN
        RAISE EXCEPTION '%: conversation % does not exist', p_action, p_conversation_id USING ERRCODE = 'CV001';
    END IF;
    IF convo._role_rank(p_role) < convo._role_rank(p_need) THEN
        RAISE EXCEPTION '%: conversation %: a % may not %', p_action, p_conversation_id, p_role,
            CASE p_need WHEN 'owner' THEN p_action || ' (the owner only)'
                        ELSE p_action || ' (the owner and participants only)' END
            USING ERRCODE = 'CV005';
    END IF;
END;
$$;

-- _may reports whether p_user_id may do p_action, which needs p_need, in
-- the conversation: false when the caller has no role in it (or it does
-- not exist: the caller then says "not found" of whatever object it
-- looked up, never naming the conversation), true when the role suffices,
-- and CV005 as _check_role when it does not. For the functions and
-- queries that find the conversation from another object (a message, a
-- comparison, a prompt, an input request).
CREATE OR REPLACE FUNCTION convo._may(p_user_id text, p_conversation_id uuid, p_action text, p_need text)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_role text := convo.member_role(p_user_id, p_conversation_id);
BEGIN
    IF v_role IS NULL THEN
        RETURN false;
    END IF;
    PERFORM convo._check_role(v_role, p_conversation_id, p_action, p_need);
    RETURN true;
END;
$$;

-- _conversation_as locks the conversation and returns it when p_user_id's
-- role in it is p_need or above, raising as _check_role does otherwise. A
-- stranger's call locks nothing.
CREATE OR REPLACE FUNCTION convo._conversation_as(p_user_id text, p_conversation_id uuid, p_action text, p_need text)
RETURNS convo.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
    v_role text;
BEGIN
    SELECT c.* INTO v_conv FROM convo.conversations c
     WHERE c.id = p_conversation_id
       AND (c.owner_id = p_user_id
            OR EXISTS (SELECT 1 FROM convo.members m WHERE m.conversation_id = c.id AND m.user_id = p_user_id))
       FOR NO KEY UPDATE;
    IF FOUND THEN
        v_role := CASE WHEN v_conv.owner_id = p_user_id THEN 'owner'
                       ELSE (SELECT m.role FROM convo.members m
                              WHERE m.conversation_id = v_conv.id AND m.user_id = p_user_id) END;
    END IF;
    PERFORM convo._check_role(v_role, p_conversation_id, p_action, p_need);
    RETURN v_conv;
END;
$$;

-- _check_member raises as _conversation_as does, without locking the
-- conversation, and returns its owner. The functions that queue prompts
-- call it before _check_prompt_quota (which must come before the
-- conversation's lock): a request for a conversation the caller cannot
-- see answers CV001, and a viewer's CV005, whatever the quota, and costs
-- nothing (not the quota's per-owner lock either). The quota charged is
-- the owner's: a conversation's prompts are its owner's
-- (prompts.owner_id), whoever sent them. _conversation_as checks again
-- under the lock (the conversation, or the membership, may go in
-- between).
CREATE OR REPLACE FUNCTION convo._check_member(p_user_id text, p_conversation_id uuid, p_action text, p_need text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_owner text;
    v_role  text;
BEGIN
    -- member_role's query, here rather than called: an SQL function with
    -- a FROM is planned anew on every call from PL/pgSQL.
    SELECT c.owner_id,
           CASE WHEN c.owner_id = p_user_id THEN 'owner'
                ELSE (SELECT m.role FROM convo.members m
                       WHERE m.conversation_id = c.id AND m.user_id = p_user_id) END
      INTO v_owner, v_role
      FROM convo.conversations c WHERE c.id = p_conversation_id;
    PERFORM convo._check_role(v_role, p_conversation_id, p_action, p_need);
    RETURN v_owner;
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
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    -- PL/pgSQL, which keeps the query's plan (its regular expressions
    -- folded to constants) for the session; an SQL function's query with a
    -- FROM is planned anew on every call.
    RETURN coalesce((
        SELECT regexp_replace(
                   left(regexp_replace(regexp_replace(l.line, '[\u0001-\u001F\u007F-\u009F]', ' ', 'g'),
                                       '^[' || convo._invisible() || ']+', ''), 80),
                   '[' || convo._invisible() || ']+$', '')
          FROM regexp_split_to_table(p_text, '[\n\r\u0085\u2028\u2029]') WITH ORDINALITY AS l(line, n)
         WHERE convo._has_visible(l.line)
         ORDER BY l.n LIMIT 1), '');
END;
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
    PERFORM convo._conversation_as(p_owner_id, p_conversation_id, 'rename_conversation', 'owner');
    UPDATE convo.conversations SET title = btrim(p_title), updated_at = now()
     WHERE id = p_conversation_id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(v_conv.id, 'conversationUpdated',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));
    SELECT * INTO v_conv FROM convo.conversations WHERE id = p_conversation_id;
    RETURN v_conv;
END;
$$;

-- set_send_policy sets the conversation's send policy, what a send that
-- names none does while a reply is in flight: 'enqueue', 'interrupt' or
-- 'reject' (send_message), or NULL (or ''): the server's, 'enqueue'.
-- Sends already queued stay queued. Event: conversationUpdated (its
-- sendPolicy). Errors, changing nothing: CV003 another policy; CV001 a
-- conversation the caller has no role in; CV005 a member (the owner only).
CREATE OR REPLACE FUNCTION convo.set_send_policy(p_owner_id text, p_conversation_id uuid, p_policy text)
RETURNS convo.conversations
LANGUAGE plpgsql AS $$
DECLARE
    v_conv convo.conversations;
BEGIN
    IF nullif(p_policy, '') NOT IN ('enqueue', 'interrupt', 'reject') THEN
        RAISE EXCEPTION 'set_send_policy: send policy must be enqueue, interrupt or reject, got "%"', left(p_policy, 40)
            USING ERRCODE = 'CV003';
    END IF;
    PERFORM convo._conversation_as(p_owner_id, p_conversation_id, 'set_send_policy', 'owner');
    UPDATE convo.conversations SET send_policy = nullif(p_policy, ''), updated_at = now()
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
    PERFORM convo._conversation_as(p_owner_id, p_conversation_id, 'clear_conversation', 'owner');
    FOR v_prompt IN
        SELECT p.id FROM convo.prompts p
         WHERE p.conversation_id = p_conversation_id AND p.status IN ('queued', 'running')
         -- queued sends first: the reply that holds the turn, cancelled
         -- last, then hands it to none (_release_turn)
         ORDER BY p.awaiting_turn DESC, p.created_at
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
    PERFORM convo._conversation_as(p_owner_id, p_conversation_id, 'delete_conversation', 'owner');
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
