-- The client API (what the server calls for its users' requests), the
-- client's side of pauses (the worker's is worker_pauses.sql): answering
-- an input request (answer_input) and claiming one (claim_input).
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), in the order of
-- db.FunctionFiles, so a change to a function is an edit here. See
-- db/README.md.

-- _input_as returns the input request when p_user_id is the owner or a
-- participant of its conversation, raising CV001 when it does not exist
-- or the caller has no role in its conversation (the two are
-- indistinguishable on purpose), CV005 when the caller only views it. It
-- takes no lock.
CREATE OR REPLACE FUNCTION convo._input_as(p_user_id text, p_tool_call_id uuid, p_action text)
RETURNS convo.input_requests
LANGUAGE plpgsql AS $$
DECLARE
    v_request convo.input_requests;
BEGIN
    SELECT r.* INTO v_request FROM convo.input_requests r WHERE r.tool_call_id = p_tool_call_id;
    IF NOT convo._may(p_user_id, v_request.conversation_id, p_action, 'participant') THEN
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
    v_request := convo._input_as(p_owner_id, p_tool_call_id, 'answer_input');
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
    v_request := convo._input_as(p_owner_id, p_tool_call_id, 'claim_input');
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
