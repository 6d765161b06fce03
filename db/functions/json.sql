-- JSON shapes. Event payloads and API responses use the proto3 JSON names of
-- the Connect API; these functions are the one place that builds them.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), so a change to a function is
-- an edit here. See db/README.md.
--
-- Helpers that run a query of their own (a FROM) are PL/pgSQL, not SQL:
-- PostgreSQL 15 plans an SQL function's query anew on every call from
-- PL/pgSQL (send_message, write_batch), where PL/pgSQL keeps its plans for
-- the session. _message_json and _block_json took 0.65 ms a call as SQL
-- and 0.09 ms as PL/pgSQL: half of a send's time (docs/performance.md,
-- "What a send costs"). Helpers of one expression stay SQL, which
-- PostgreSQL inlines into their callers.

-- _ts is STABLE, as its body is (to_char): an SQL function declared
-- IMMUTABLE around a STABLE body is never inlined, and was called, and
-- planned, anew for every timestamp of every message JSON.
CREATE OR REPLACE FUNCTION convo._ts(t timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- _object drops the top-level keys of o whose value is JSON null, the way
-- proto3 JSON omits unset fields; nested values (tool inputs, model
-- configurations, metadata) are left exactly as they are.
CREATE OR REPLACE FUNCTION convo._object(o jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}')
          FROM jsonb_each(o) e
         WHERE jsonb_typeof(e.value) <> 'null');
END;
$$;

-- _conversation_json and _prompt_json leave out null fields by
-- jsonb_strip_nulls, as _message_json does, not by a call of _object (a
-- query of its own, run for every event they are in): every value
-- stripped is a column's, at the top level. A prompt's model
-- configuration, nested JSON kept exactly as it is, is added after the
-- strip.
CREATE OR REPLACE FUNCTION convo._conversation_json(c convo.conversations) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'id', c.id,
        'title', nullif(c.title, ''),
        'activePromptId', c.active_prompt_id,
        'createdAt', convo._ts(c.created_at),
        'updatedAt', convo._ts(c.updated_at),
        'lastMessageAt', convo._ts(c.last_message_at),
        'sendPolicy', 'SEND_POLICY_' || upper(c.send_policy)))
$$;

-- The message JSON: its prompt (promptId; error, the prompt's error, for
-- a failed message only), feedback, the comparison, and the message's
-- place in its conversation's tree (parentId; siblingCount and siblingIndex, see
-- _sibling_place), and queued (true only: a send that waits for the reply
-- before it, see _release_turn). Null fields are left out as _object leaves them out,
-- but by jsonb_strip_nulls: every value here is a column, so the nulls it
-- also strips below the top level (feedback's) are ones _object dropped
-- too, without a call of _object.
CREATE OR REPLACE FUNCTION convo._message_json(m convo.messages) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT jsonb_strip_nulls(jsonb_build_object(
            'id', m.id,
            'conversationId', m.conversation_id,
            'role', m.role,
            'senderId', m.sender_id,
            'status', m.status,
            'promptId', p.id,
            'error', CASE WHEN m.status = 'failed' THEN nullif(p.error, '') END,
            'createdAt', convo._ts(m.created_at),
            'updatedAt', convo._ts(m.updated_at),
            'feedback', CASE WHEN m.feedback_rating IS NOT NULL THEN jsonb_build_object(
                'rating', 'RATING_' || upper(m.feedback_rating),
                'comment', nullif(m.feedback_comment, ''),
                'createdAt', convo._ts(m.feedback_at)) END,
            'comparisonId', m.comparison_id,
            'comparisonSlot', m.comparison_slot,
            'parentId', m.parent_id,
            'siblingCount', sp.sibling_count,
            'siblingIndex', sp.sibling_index,
            'queued', CASE WHEN m.queued THEN true END))
          FROM convo._sibling_place(m) sp
          LEFT JOIN convo.prompts p ON p.message_id = m.id);
END;
$$;

CREATE OR REPLACE FUNCTION convo._prompt_json(p convo.prompts) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'id', p.id,
        'conversationId', p.conversation_id,
        'messageId', p.message_id,
        'status', p.status,
        'error', p.error,
        'createdAt', convo._ts(p.created_at),
        'startedAt', convo._ts(p.started_at),
        'endedAt', convo._ts(p.ended_at)))
        || CASE WHEN p.model_config IS NOT NULL THEN jsonb_build_object('modelConfig', p.model_config) ELSE '{}' END
$$;

CREATE OR REPLACE FUNCTION convo._tool_call_json(t convo.tool_calls) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT convo._object(jsonb_build_object(
        'id', t.id,
        'blockId', t.block_id,
        'name', t.name,
        'status', t.status,
        'input', t.input,
        'output', nullif(t.output, ''),
        'error', t.error,
        'startedAt', convo._ts(t.started_at),
        'endedAt', convo._ts(t.ended_at)))
$$;

CREATE OR REPLACE FUNCTION convo._block_text(p_block_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce(string_agg(e.payload->>'content', '' ORDER BY e.seq), '')
      FROM convo.blocks b
      JOIN convo.events e
        ON e.prompt_id = b.prompt_id AND e.seq > coalesce(b.start_seq, 0)
       AND e.block_id = b.id AND e.kind = 'blockDelta'
     WHERE b.id = p_block_id
$$;

CREATE OR REPLACE FUNCTION convo._tool_output(p_tool_call_id uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce(string_agg(e.payload->>'output', '' ORDER BY e.seq), '')
      FROM convo.tool_calls t
      JOIN convo.blocks b ON b.id = t.block_id
      JOIN convo.events e
        ON e.prompt_id = t.prompt_id AND e.seq > coalesce(b.start_seq, 0)
       AND e.tool_call_id = t.id AND e.kind = 'toolCallProgress'
     WHERE t.id = p_tool_call_id
$$;

-- _input_request_json is an input request (convo.input_requests) in the
-- proto3 JSON of convo.v1.InputRequest.
CREATE OR REPLACE FUNCTION convo._input_request_json(r convo.input_requests) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT convo._object(jsonb_build_object(
        'toolCallId', r.tool_call_id,
        'promptId', r.prompt_id,
        'conversationId', r.conversation_id,
        'kind', r.kind,
        'request', r.request,
        'status', r.status,
        'answer', r.answer,
        'answeredAt', convo._ts(r.answered_at),
        'expiresAt', convo._ts(r.expires_at),
        'claimedBy', r.claimed_by,
        'claimExpiresAt', convo._ts(r.claim_expires_at),
        'createdAt', convo._ts(r.created_at)))
$$;

-- _file_json is a file block's file in the proto3 JSON of convo.v1.File,
-- from the block's metadata (convo._write_user_blocks): only the values
-- of the right JSON type are taken, so that no metadata, whatever wrote
-- it, makes an event the proto decoder refuses. The signed url is the
-- server's to add.
CREATE OR REPLACE FUNCTION convo._file_json(p_metadata jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'id', CASE WHEN jsonb_typeof(p_metadata->'fileId') = 'string' THEN p_metadata->'fileId' END,
        'filename', CASE WHEN jsonb_typeof(p_metadata->'filename') = 'string' THEN p_metadata->'filename' END,
        'mediaType', CASE WHEN jsonb_typeof(p_metadata->'mediaType') = 'string' THEN p_metadata->'mediaType' END,
        'size', CASE WHEN jsonb_typeof(p_metadata->'size') = 'number' AND (p_metadata->>'size')::numeric BETWEEN 0 AND 9007199254740991
                          AND (p_metadata->>'size')::numeric = trunc((p_metadata->>'size')::numeric)
                     THEN p_metadata->'size' END,
        'sha256', CASE WHEN jsonb_typeof(p_metadata->'sha256') = 'string' THEN p_metadata->'sha256' END))
$$;

-- _block_json is a block in the proto3 JSON of convo.v1.Block, with its
-- tool call; a streaming block's content and a running call's output are
-- read back from their events. The keys that can be absent (content, a
-- text, and toolCall) are added only when present, rather than dropped by
-- _object: a branchSwitched builds the JSON of hundreds of blocks.
CREATE OR REPLACE FUNCTION convo._block_json(b convo.blocks) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT jsonb_build_object(
                   'id', b.id,
                   'blockType', b.block_type,
                   'metadata', b.metadata,
                   'status', b.status,
                   'position', b.position)
            || jsonb_strip_nulls(jsonb_build_object('content',
                   nullif(CASE WHEN b.status = 'streaming' THEN convo._block_text(b.id) ELSE b.content END, '')))
            || coalesce((SELECT jsonb_build_object('toolCall',
                                    convo._tool_call_json(t) || CASE WHEN t.status IN ('started', 'running')
                                                                     THEN convo._object(jsonb_build_object('output', nullif(convo._tool_output(t.id), '')))
                                                                     ELSE '{}' END)
                           FROM convo.tool_calls t WHERE t.block_id = b.id), '{}')
            || CASE WHEN b.block_type = 'file' THEN jsonb_build_object('file', convo._file_json(b.metadata)) ELSE '{}' END);
END;
$$;

-- convo._json_check applies convo's rule for stored JSON (the Go doors
-- apply the same one, internal/jsonlimit): every number fits a 64-bit
-- float (no overflow to infinity, no non-zero value that rounds to zero),
-- and arrays and objects nest at most 64 levels. A value that breaks it
-- raises CV003 naming p_field and the offending number (or the depth); a
-- value that keeps it is returned as it is, so a writer wraps its
-- argument: `convo._json_check(p_metadata, 'start_block: metadata')`.
-- (U+0000 and lone surrogates, which jsonb cannot hold, never get this
-- far: PostgreSQL refuses them with 22P05 or 22P02; and a number past
-- numeric's own range, 1e999999, with 22003.)
--
-- The depth is checked first and only down to level 64, so that the
-- number check, which walks the whole value recursively, never meets a
-- value nested thousands deep (jsonb holds one: walked to the bottom it
-- would exhaust the stack, 54001, instead of naming the field).
CREATE OR REPLACE FUNCTION convo._json_check(p_value jsonb, p_field text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  bad    jsonb;
  v_text text;
BEGIN
  IF p_value IS NULL OR jsonb_typeof(p_value) NOT IN ('object', 'array', 'number') THEN
    RETURN p_value;
  END IF;
  -- A container at level 64 (the value itself is level 0) is the 65th
  -- level of nesting; .**{64} looks no deeper than that.
  IF jsonb_path_exists(p_value, 'strict $.**{64} ? (@.type() == "object" || @.type() == "array")') THEN
    RAISE EXCEPTION '%: nested deeper than 64 levels', p_field USING ERRCODE = 'CV003';
  END IF;
  -- jsonb's text writes a number in full, without an exponent: one
  -- outside the range has 309 digits or more before its point, or 323
  -- zeros or more after "0.". Only a text with such a run (a string may
  -- hold one too) is walked number by number, which costs some five times
  -- as much. A text shorter than 309 characters has none, and is not
  -- searched either: the expression's bounded repeats make it a few
  -- microseconds even on a short text, and every write of JSON checks.
  v_text := p_value::text;
  IF length(v_text) < 309 OR v_text !~ '[0-9]{250}[0-9]{59}|0\.0{250}0{73}' THEN
    RETURN p_value;
  END IF;
  bad := jsonb_path_query_first(p_value,
    'strict $.** ? (@.type() == "number" && (@ > 1.797693134862315807e308 || @ < -1.797693134862315807e308
                    || (@ != 0 && @ < 2.4703282292062328e-324 && @ > -2.4703282292062328e-324)))');
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION '%: number % is outside the range of a 64-bit float (magnitude between 5e-324 and 1.7e308, or 0)',
      p_field, trim(to_char((bad #>> '{}')::numeric, '9.99EEEE')) USING ERRCODE = 'CV003';
  END IF;
  RETURN p_value;
END
$$;
