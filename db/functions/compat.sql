-- What keeps the previous release's calls working while it serves beside
-- this one during a rolling upgrade (docs/deploy.md, "Upgrades"; the rule
-- is in db/README.md). Applied after every other file but privileges.sql.
--
-- A signature that changes is expanded, then contracted: the new one is
-- defined where the function lives, and the old one stays callable for
-- one release. When the change only adds trailing arguments with
-- defaults, the new function already answers the old calls, and no
-- overload may be added beside it (the old calls would become ambiguous).
-- Otherwise the old signature is defined here, delegating to the new
-- one, and a migration of the next release drops it.

-- send_messages gained p_trace_contexts (00035), DEFAULT NULL: the
-- previous release's calls with six arguments resolve to it. A server of
-- that release re-applies its own functions when it restarts, which puts
-- the six-argument send_messages back beside the new one and makes every
-- six-argument call ambiguous ("function convo.send_messages(...) is not
-- unique"); every start of this release drops it again. Drop this
-- statement with the next release.
DROP FUNCTION IF EXISTS convo.send_messages(text[], uuid[], text[], text[], uuid[], text[]);

-- The owner-only checks of the previous release (00037 made every check
-- one of the caller's role: client_conversations.sql). Its functions call
-- these; one of its calls running while 00037 commits (its function
-- bodies already compiled) must still find them, with their meaning of
-- then: the conversation's, or the input request's, owner only. Nothing
-- of this release calls them. A migration of the next release drops
-- them, and this statement goes.
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

CREATE OR REPLACE FUNCTION convo._check_owner(p_owner_id text, p_conversation_id uuid, p_action text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM convo.conversations c WHERE c.id = p_conversation_id AND c.owner_id = p_owner_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: conversation % does not exist', p_action, p_conversation_id USING ERRCODE = 'CV001';
    END IF;
END;
$$;

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
