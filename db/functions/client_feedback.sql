-- The client API (what the server calls for its users' requests): a
-- user's rating of a reply (set_feedback) and vote in a side-by-side
-- comparison (vote_comparison).
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), in the order of
-- db.FunctionFiles, so a change to a function is an edit here. See
-- db/README.md.

-- set_feedback rates an assistant message of a conversation of which
-- p_owner_id is the owner or a participant ('up' or 'down', with an
-- optional comment); a second rating replaces the first (the rating is
-- the conversation's, not each member's). CV001 for a message of a
-- conversation the caller has no role in, CV005 for one the caller only
-- views. Event: messageUpdated.
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
    SELECT m.* INTO v_message FROM convo.messages m WHERE m.id = p_message_id;
    IF NOT convo._may(p_owner_id, v_message.conversation_id, 'set_feedback', 'participant') THEN
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

-- vote_comparison records the preference ('a', 'b' or 'tie') of the
-- conversation's owner or a participant in a comparison; a second vote
-- replaces the first (whoever cast it). CV001 for a comparison of a
-- conversation the caller has no role in, CV005 for one the caller only
-- views. Votes are not conversation events: they change no message,
-- prompt or block.
CREATE OR REPLACE FUNCTION convo.vote_comparison(p_owner_id text, p_comparison_id uuid, p_preference text)
RETURNS convo.comparisons
LANGUAGE plpgsql AS $$
DECLARE
    v_comparison convo.comparisons;
BEGIN
    IF p_preference IS NULL OR p_preference NOT IN ('a', 'b', 'tie') THEN
        RAISE EXCEPTION 'vote_comparison: preference must be a, b or tie' USING ERRCODE = 'CV003';
    END IF;
    SELECT cmp.* INTO v_comparison FROM convo.comparisons cmp WHERE cmp.id = p_comparison_id;
    IF NOT convo._may(p_owner_id, v_comparison.conversation_id, 'vote_comparison', 'participant') THEN
        RAISE EXCEPTION 'vote_comparison: comparison % does not exist', p_comparison_id USING ERRCODE = 'CV001';
    END IF;
    UPDATE convo.comparisons cmp
       SET preference = p_preference, voted_at = now()
     WHERE cmp.id = p_comparison_id
    RETURNING cmp.* INTO v_comparison;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'vote_comparison: comparison % does not exist', p_comparison_id USING ERRCODE = 'CV001';
    END IF;
    RETURN v_comparison;
END;
$$;
