-- Conversations as trees: the parent of every message, the active path a
-- reader sees, and the event that changes it (docs/branches.md; the
-- columns are db/schema/00016_branches.sql's).
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), so a change to a function is
-- an edit here. See db/README.md. It comes first: _message_json
-- (json.sql) calls _sibling_place.

-- _context_messages is what the model answering the message p_message_id
-- is shown of its conversation: its ancestors, and the other reply of
-- each comparison among them (prompt_context picks one of the two). A
-- loop, not a recursive query: each step up is one lookup by primary key
-- (a comparison's other reply is found through its prompts), so the cost
-- is the depth of the message whatever the planner's statistics say, and
-- the function is not inlined into prompt_context, whose plan then starts
-- from the prompt.
CREATE OR REPLACE FUNCTION convo._context_messages(p_message_id uuid) RETURNS SETOF uuid
LANGUAGE plpgsql STABLE ROWS 50 AS $$
DECLARE
    v_id         uuid;
    v_next       uuid;
    v_comparison uuid;
BEGIN
    SELECT m.parent_id INTO v_id FROM convo.messages m WHERE m.id = p_message_id;
    WHILE v_id IS NOT NULL LOOP
        RETURN NEXT v_id;
        SELECT m.parent_id, m.comparison_id INTO v_next, v_comparison FROM convo.messages m WHERE m.id = v_id;
        IF v_comparison IS NOT NULL THEN
            RETURN QUERY SELECT pr.message_id FROM convo.comparisons c
                           JOIN convo.prompts pr ON pr.id IN (c.prompt_a, c.prompt_b)
                          WHERE c.id = v_comparison AND pr.message_id <> v_id;
        END IF;
        v_id := v_next;
    END LOOP;
END;
$$;

-- _path is the path from a first message down to p_leaf: p_leaf, its
-- ancestors, and the other reply of every comparison among them (p_leaf's
-- own included). One recursive query up the tree, each step one look-up
-- by primary key: the parent (and a comparison's replies) is a LATERAL
-- subquery kept apart (OFFSET 0), so no other plan is possible (as for
-- switch_branch's walk down), and a branch of thousands of messages costs
-- no statement per message (the loop of _context_messages did).
CREATE OR REPLACE FUNCTION convo._path(p_leaf uuid) RETURNS SETOF uuid
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE up AS (
        SELECT m.id, m.parent_id, m.comparison_id FROM convo.messages m WHERE m.id = p_leaf
        UNION ALL
        SELECT p.id, p.parent_id, p.comparison_id
          FROM up
         CROSS JOIN LATERAL (SELECT x.id, x.parent_id, x.comparison_id FROM convo.messages x
                              WHERE x.id = up.parent_id OFFSET 0) p
    )
    SELECT up.id FROM up
    UNION
    SELECT p_leaf
    UNION
    SELECT o.message_id FROM up
     CROSS JOIN LATERAL (SELECT pr.message_id FROM convo.comparisons c
                           JOIN convo.prompts pr ON pr.id IN (c.prompt_a, c.prompt_b)
                          WHERE c.id = up.comparison_id OFFSET 0) o
     WHERE up.comparison_id IS NOT NULL
$$;

-- _sibling_place says how many versions the turn of message m has
-- (sibling_count: the children of m's parent, or the conversation's first
-- messages when m has none; the two replies of a comparison count once)
-- and which of them, in the order they were made, m is (sibling_index,
-- from 0; slot "b" has its slot "a"'s). The two branches of the UNION
-- each read one index (messages_parent_idx, messages_roots_idx).
CREATE OR REPLACE FUNCTION convo._sibling_place(m convo.messages)
RETURNS TABLE (sibling_count integer, sibling_index integer)
LANGUAGE sql STABLE AS $$
    SELECT count(*)::integer,
           (count(*) FILTER (WHERE s.position < m.position
                               AND (m.comparison_id IS NULL OR s.comparison_id IS DISTINCT FROM m.comparison_id)))::integer
      FROM (SELECT x.position, x.comparison_id FROM convo.messages x
             WHERE m.parent_id IS NOT NULL AND x.parent_id = m.parent_id AND x.comparison_slot IS DISTINCT FROM 'b'
            UNION ALL
            SELECT x.position, x.comparison_id FROM convo.messages x
             WHERE m.parent_id IS NULL AND x.parent_id IS NULL AND x.conversation_id = m.conversation_id
               AND x.comparison_slot IS DISTINCT FROM 'b') s
$$;

-- _active_leaf is the conversation's active leaf: the newest message on
-- its active path that is not slot "b" of a comparison (the next message
-- hangs below slot "a"); NULL when the conversation has no message.
-- PL/pgSQL, which keeps its plan for the session: as an SQL function (its
-- query has a FROM, so it is never inlined) PostgreSQL 15 planned it anew
-- on every call, a twentieth of a send's time.
CREATE OR REPLACE FUNCTION convo._active_leaf(p_conversation_id uuid) RETURNS uuid
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT m.id FROM convo.messages m
             WHERE m.conversation_id = p_conversation_id AND m.on_active_path
               AND m.comparison_slot IS DISTINCT FROM 'b'
             ORDER BY m.position DESC LIMIT 1);
END;
$$;

-- _message_tail says where the latest messages of the active path after
-- p_after and before p_before that fit in p_max_bytes begin
-- (from_position), and whether messages of the path before that remain
-- (older): the bound of a stream's snapshot and a ListMessages page
-- (p_after -1: the whole path) and of a large branchSwitched (p_after
-- its fork: the messages before it are not sent, so not sized).
-- A message's size is its blocks' text, metadata and tool calls, and a
-- failed one's error (its prompt's), plus 256 bytes, so that many small
-- messages count too; only sizes are read, not
-- the text itself (octet_length of a stored value reads its header). The
-- newest message is always in, however large, and so is every message
-- still being written (pending or processing) with every message after
-- it. At most p_max_bytes / 256 + 1 messages (the most that can fit) are
-- sized. from_position is p_before when the path has no message in the
-- range.
CREATE OR REPLACE FUNCTION convo._message_tail(p_conversation_id uuid, p_after bigint, p_before bigint, p_max_bytes bigint)
RETURNS TABLE (from_position bigint, older boolean)
LANGUAGE sql STABLE AS $$
    WITH newest AS (
      SELECT m.id, m.position, m.status
        FROM convo.messages m
       WHERE m.conversation_id = p_conversation_id AND m.on_active_path
         AND m.position > p_after AND m.position < p_before
       ORDER BY m.position DESC
       LIMIT p_max_bytes / 256 + 1
    ), sized AS (
      SELECT n.position,
             sum(256 + coalesce((SELECT sum(octet_length(b.content) + pg_column_size(b.metadata))
                                   FROM convo.blocks b WHERE b.message_id = n.id), 0)
                     + coalesce((SELECT sum(pg_column_size(t.input) + octet_length(t.output) + coalesce(octet_length(t.error), 0))
                                   FROM convo.blocks b JOIN convo.tool_calls t ON t.block_id = b.id
                                  WHERE b.message_id = n.id), 0)
                     + CASE WHEN n.status = 'failed'
                            THEN coalesce((SELECT octet_length(p.error) FROM convo.prompts p
                                            WHERE p.message_id = n.id), 0)
                            ELSE 0 END)
               OVER (ORDER BY n.position DESC) AS running,
             row_number() OVER (ORDER BY n.position DESC) AS nth
        FROM newest n
    ), bounds AS (
      SELECT coalesce(least(
               (SELECT min(position) FROM sized WHERE running <= p_max_bytes OR nth = 1),
               (SELECT min(m.position) FROM convo.messages m
                 WHERE m.conversation_id = p_conversation_id AND m.on_active_path
                   AND m.position > p_after AND m.position < p_before
                   AND m.status IN ('pending', 'processing'))
             ), p_before) AS from_position
    )
    SELECT b.from_position,
           EXISTS (SELECT 1 FROM convo.messages m
                    WHERE m.conversation_id = p_conversation_id AND m.on_active_path
                      AND m.position < b.from_position)
      FROM bounds b
$$;

-- _messages_token is the page token of the path's messages before
-- position p_before: Snapshot.older_page_token and ListMessages' tokens,
-- which wire.EncodeMessagesToken makes in Go (base64url, unpadded, of the
-- byte 'm' and the position as 8 big-endian bytes). A large
-- branchSwitched carries one.
CREATE OR REPLACE FUNCTION convo._messages_token(p_before bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT rtrim(translate(encode('\x6d'::bytea || int8send(p_before), 'base64'), '+/', '-_'), '=')
$$;

-- _event_bytes bounds the messages a branchSwitched carries:
-- convo.snapshot_bytes, which cmd/api sets to its snapshot size
-- (CONVO_SNAPSHOT_BYTES) for the statements that change a path, or 256
-- KiB, the snapshot's default, when it is not set. A value that is not a
-- whole number of bytes from 1 (set by hand, ALTER ROLE ... SET) raises
-- 22023 naming the setting: read as a number it failed with a cast error
-- that named nothing, or, negative, with "LIMIT must not be negative".
CREATE OR REPLACE FUNCTION convo._event_bytes() RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_setting text := btrim(coalesce(current_setting('convo.snapshot_bytes', true), ''));
BEGIN
    IF v_setting = '' THEN
        RETURN 262144;
    END IF;
    IF v_setting !~ '^[0-9]{1,15}$' OR v_setting::bigint < 1 THEN
        RAISE EXCEPTION 'convo.snapshot_bytes must be a whole number of bytes, at least 1 (cmd/api sets it to CONVO_SNAPSHOT_BYTES), got "%"',
            left(v_setting, 40) USING ERRCODE = '22023';
    END IF;
    RETURN v_setting::bigint;
END;
$$;

-- _change_path makes the path down to p_new_leaf the conversation's active
-- path, under the conversation's lock (the caller holds it), and appends
-- the branchSwitched event that says so: fork_message_id, the last message
-- the old and new paths share (the path is kept up to it; none when they
-- share nothing), leaf_message_id, and messages, every message of the new
-- path after the fork, in order, with their blocks. When those do not fit
-- in a snapshot's size (_event_bytes; an edit of an early turn that
-- switches to a long branch), messages holds only the latest that fit, as
-- a snapshot does, and olderPageToken pages in the rest: a reader then
-- replaces every message it holds with these. Messages the caller just
-- made must be inserted with on_active_path false: this marks them. When
-- the paths share nothing (another version of the first message: an edit
-- of it, or a switch), the title follows the first message
-- (_follow_first_message). It returns the branchSwitched event's seq.
CREATE OR REPLACE FUNCTION convo._change_path(p_conversation_id uuid, p_new_leaf uuid) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_new      uuid[];
    v_fork     convo.messages;
    v_from     bigint;
    v_older    text;
    v_messages jsonb;
    v_old_root uuid;
    v_seq      bigint;
BEGIN
    v_new := ARRAY(SELECT convo._path(p_new_leaf));
    SELECT * INTO v_fork FROM convo.messages m
     WHERE m.id = ANY (v_new) AND m.on_active_path
     ORDER BY m.position DESC LIMIT 1;
    IF v_fork.id IS NULL THEN
        SELECT m.id INTO v_old_root FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.on_active_path AND m.parent_id IS NULL
         ORDER BY m.position LIMIT 1;
    END IF;
    UPDATE convo.messages m SET on_active_path = (m.id = ANY (v_new))
     WHERE m.conversation_id = p_conversation_id
       AND (m.on_active_path OR m.id = ANY (v_new))
       AND m.position > coalesce(v_fork.position, -1);
    -- The new path's messages after the fork, or the latest of them that
    -- fit when some before those do not (the path up to the fork is the
    -- reader's already, and is not sized).
    SELECT t.from_position INTO v_from
      FROM convo._message_tail(p_conversation_id, coalesce(v_fork.position, -1), 9223372036854775807,
                               convo._event_bytes()) t;
    IF EXISTS (SELECT 1 FROM convo.messages m
                WHERE m.conversation_id = p_conversation_id AND m.on_active_path
                  AND m.position > coalesce(v_fork.position, -1) AND m.position < v_from) THEN
        v_older := convo._messages_token(v_from);
    END IF;
    SELECT coalesce(jsonb_agg(convo._message_json(m) || jsonb_build_object('blocks',
               (SELECT coalesce(jsonb_agg(convo._block_json(b) ORDER BY b.position), '[]')
                  FROM convo.blocks b WHERE b.message_id = m.id))
             ORDER BY m.position), '[]')
      INTO v_messages
      FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.on_active_path AND m.position >= v_from;
    v_seq := convo._append_event(p_conversation_id, 'branchSwitched', convo._object(jsonb_build_object(
        'forkMessageId', v_fork.id,
        'leafMessageId', p_new_leaf,
        'messages', v_messages,
        'olderPageToken', v_older)));
    IF v_fork.id IS NULL AND v_old_root IS NOT NULL THEN
        PERFORM convo._follow_first_message(p_conversation_id, v_old_root);
    END IF;
    RETURN v_seq;
END;
$$;

-- _message_text is what a message says: its text blocks, in order.
CREATE OR REPLACE FUNCTION convo._message_text(p_message_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce(string_agg(b.content, '' ORDER BY b.position), '')
      FROM convo.blocks b WHERE b.message_id = p_message_id AND b.block_type = 'text'
$$;

-- _follow_first_message retitles the conversation after its active path
-- moved from the first message p_old_root to another version of it (an
-- edit of the first message, or a switch between its versions): a title
-- that is the one the old first message gives (_title_from_text, as
-- send_message took it) becomes the one the new first message gives; a
-- title set otherwise (rename_conversation, create_conversation) stays.
-- A title that changes is written with its conversationUpdated event. The
-- caller holds the conversation's lock.
CREATE OR REPLACE FUNCTION convo._follow_first_message(p_conversation_id uuid, p_old_root uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_conv     convo.conversations;
    v_new_root uuid;
    v_title    text;
BEGIN
    SELECT m.id INTO v_new_root FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.on_active_path AND m.parent_id IS NULL
     ORDER BY m.position LIMIT 1;
    IF v_new_root IS NULL OR v_new_root = p_old_root THEN
        RETURN;
    END IF;
    SELECT * INTO v_conv FROM convo.conversations c WHERE c.id = p_conversation_id;
    IF v_conv.title <> convo._title_from_text(convo._message_text(p_old_root)) THEN
        RETURN;
    END IF;
    v_title := convo._title_from_text(convo._message_text(v_new_root));
    IF v_title = v_conv.title THEN
        RETURN;
    END IF;
    UPDATE convo.conversations c SET title = v_title, updated_at = now()
     WHERE c.id = p_conversation_id
    RETURNING * INTO v_conv;
    PERFORM convo._append_event(p_conversation_id, 'conversationUpdated',
        jsonb_build_object('conversation', convo._conversation_json(v_conv)));
END;
$$;
