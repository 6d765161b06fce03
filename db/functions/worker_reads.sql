-- What a worker reads, besides what the write functions return: the
-- model's context, the reply so far, the answers of its input requests, a
-- prompt's status and its batch mark (docs/worker-api.md). Each takes the
-- worker's name and answers only about a prompt that worker holds, so that
-- a connection of the worker role (privileges.sql), which may read no
-- table, cannot read a conversation no prompt of its own answers.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), so a change to a function is
-- an edit here. See db/README.md.

-- _held_prompt returns the prompt worker holds (claimed or running, not
-- handed back), raising CV001 otherwise: an unknown prompt and one another
-- worker holds (or nobody) answer alike, so that a caller cannot probe
-- which prompts exist.
CREATE OR REPLACE FUNCTION convo._held_prompt(p_prompt_id uuid, p_worker text, p_action text) RETURNS convo.prompts
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_prompt convo.prompts;
BEGIN
    SELECT * INTO v_prompt FROM convo.prompts p
     WHERE p.id = p_prompt_id AND p.worker = p_worker AND p.status IN ('queued', 'running');
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: prompt % is not held by worker %', p_action, p_prompt_id, p_worker
            USING ERRCODE = 'CV001', HINT = 'claim the prompt first (convo.claim_prompts)';
    END IF;
    RETURN v_prompt;
END;
$$;

-- worker_context returns the rows of the view convo.prompt_context of a
-- prompt worker holds: the finished blocks of the messages before the
-- prompt's own that its model sees. Order them by message_position,
-- block_position. CV001 unless worker holds the prompt.
CREATE OR REPLACE FUNCTION convo.worker_context(prompt_id uuid, worker text)
RETURNS SETOF convo.prompt_context
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM convo._held_prompt(worker_context.prompt_id, worker_context.worker, 'worker_context');
    RETURN QUERY
    SELECT c.*
      FROM convo.prompt_context c
     WHERE c.prompt_id = worker_context.prompt_id
     ORDER BY c.message_position, c.block_position;
END;
$$;

-- worker_reply returns the rows of the view convo.prompt_reply of a prompt
-- worker holds: its own reply so far, which a worker resuming a paused
-- prompt gives the model. Order them by block_position. CV001 unless
-- worker holds the prompt.
CREATE OR REPLACE FUNCTION convo.worker_reply(prompt_id uuid, worker text)
RETURNS SETOF convo.prompt_reply
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM convo._held_prompt(worker_reply.prompt_id, worker_reply.worker, 'worker_reply');
    RETURN QUERY
    SELECT r.*
      FROM convo.prompt_reply r
     WHERE r.prompt_id = worker_reply.prompt_id
     ORDER BY r.block_position;
END;
$$;

-- prompt_inputs returns the input requests of the tool calls of a prompt
-- worker holds, in the order the calls started, each with its call and
-- its answer: what a worker that resumes the prompt reads. status is
-- pending, answered, expired (answer is then the denial expire_leases
-- wrote) or cancelled; answer is NULL unless answered or expired. A
-- request whose tool call is still open (tool_call_status started) is one
-- the worker has not acted on yet. CV001 unless worker holds the prompt.
-- VOLATILE, so that it sees the claim of the statement that calls it:
-- the runtimes ask EXISTS (SELECT 1 FROM convo.prompt_inputs(c.prompt_id,
-- worker)) of each row of claim_prompts (is it a resumed prompt?), which
-- a STABLE function, reading the statement's snapshot, would find held
-- by nobody.
CREATE OR REPLACE FUNCTION convo.prompt_inputs(prompt_id uuid, worker text)
RETURNS TABLE (tool_call_id uuid, block_id uuid, name text, input jsonb, tool_call_status text, kind text,
               request jsonb, status text, answer jsonb, answered_at timestamptz, expires_at timestamptz)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM convo._held_prompt(prompt_inputs.prompt_id, prompt_inputs.worker, 'prompt_inputs');
    RETURN QUERY
    SELECT r.tool_call_id, t.block_id, t.name, t.input, t.status, r.kind,
           r.request, r.status, r.answer, r.answered_at, r.expires_at
      FROM convo.input_requests r
      JOIN convo.tool_calls t ON t.id = r.tool_call_id
     WHERE r.prompt_id = prompt_inputs.prompt_id
     ORDER BY t.started_at, t.id;
END;
$$;

-- prompt_status returns the status (queued, running, completed, failed,
-- cancelled) of a prompt worker holds or held last: what a worker reads
-- when a write finds the prompt no longer its own, to tell a cancel from
-- a lost lease. NULL when the prompt is unknown, or another worker (or
-- none: it was handed back) holds it now.
CREATE OR REPLACE FUNCTION convo.prompt_status(prompt_id uuid, worker text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT p.status FROM convo.prompts p
     WHERE p.id = prompt_status.prompt_id AND p.worker = prompt_status.worker
$$;

-- worker_batch_mark returns the number of the last batch write_batch
-- applied for worker's lane (one row), or no row when it has none: a
-- worker that starts (or restarts with its name) numbers on from there.
CREATE OR REPLACE FUNCTION convo.worker_batch_mark(worker text, lane integer)
RETURNS TABLE (batch bigint)
LANGUAGE sql STABLE AS $$
    SELECT w.batch FROM convo.worker_batches w
     WHERE w.worker = worker_batch_mark.worker AND w.lane = worker_batch_mark.lane
$$;

-- _prompt_files is what prompt_files returns, without its check: the
-- files held by the messages of the prompt's context, the messages
-- prompt_context reads (_context_messages: the ancestors of the prompt's
-- message, with the preferred reply of each comparison among them), in
-- message then file order. Only user messages hold files; the conditions
-- on the message are prompt_context's all the same, so that the two can
-- never disagree on which messages a model sees. chunks is how many 256
-- KiB chunks file_chunk serves (0 for a file whose bytes are in S3).
CREATE OR REPLACE FUNCTION convo._prompt_files(p_prompt_id uuid)
RETURNS TABLE (message_id uuid, message_position bigint, file_position integer, file_id uuid, filename text,
               media_type text, size bigint, sha256 text, storage text, blob_id uuid, chunks integer)
LANGUAGE sql STABLE AS $$
    SELECT m.id, m.position, mf.position, f.id, f.filename, f.media_type, f.size, f.sha256, fb.storage, fb.id,
           CASE WHEN fb.storage = 'postgres' THEN ((f.size + 262143) / 262144)::integer ELSE 0 END
      FROM convo.prompts p
      JOIN convo.messages target ON target.id = p.message_id
     CROSS JOIN LATERAL convo._context_messages(target.id) AS ctx(id)
      JOIN convo.messages m ON m.id = ctx.id AND m.position < target.position
      JOIN convo.message_files mf ON mf.message_id = m.id
      JOIN convo.files f ON f.id = mf.file_id
      JOIN convo.file_blobs fb ON fb.id = f.blob_id
      LEFT JOIN convo.comparisons c ON c.id = m.comparison_id
     WHERE p.id = p_prompt_id
       AND (m.role <> 'assistant' OR m.status IN ('completed', 'cancelled'))
       AND (m.comparison_id IS NULL
            OR (m.comparison_id IS DISTINCT FROM target.comparison_id
                AND m.comparison_slot = coalesce(nullif(c.preference, 'tie'), 'a')))
     ORDER BY m.position, mf.position
$$;

-- prompt_files returns the files held by the messages of the context of a
-- prompt worker holds (the messages worker_context reads, a message of
-- files only included), in message then file order: each file's message
-- and place in it, its metadata, where its bytes are (storage 'postgres'
-- or 's3'; blob_id, the object's key in the bucket for 's3') and how many
-- 256 KiB chunks file_chunk serves (0 for 's3'). CV001 unless worker
-- holds the prompt.
CREATE OR REPLACE FUNCTION convo.prompt_files(prompt_id uuid, worker text)
RETURNS TABLE (message_id uuid, message_position bigint, file_position integer, file_id uuid, filename text,
               media_type text, size bigint, sha256 text, storage text, blob_id uuid, chunks integer)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM convo._held_prompt(prompt_files.prompt_id, prompt_files.worker, 'prompt_files');
    RETURN QUERY SELECT * FROM convo._prompt_files(prompt_files.prompt_id);
END;
$$;

-- worker_prompt_read returns, in one call, what a worker reads to start
-- a prompt worker holds: the rows of worker_context (kind 'block', in
-- message_position, block_position order), then those of prompt_files
-- (kind 'file', in message_position, file_position order); the columns of
-- the other kind are NULL. The files are looked for only when a message
-- of the prompt's conversation holds one: a conversation without files
-- costs one probe, not prompt_files' walk. worker_context and
-- prompt_files stay for workers that read them apart. CV001 unless worker
-- holds the prompt.
CREATE OR REPLACE FUNCTION convo.worker_prompt_read(prompt_id uuid, worker text)
RETURNS TABLE (kind text, message_id uuid, message_position bigint, role text, block_position integer,
               block_type text, content text, metadata jsonb, tool_call_id uuid, tool_name text, tool_input jsonb,
               tool_status text, tool_output text, tool_error text, file_position integer, file_id uuid,
               filename text, media_type text, size bigint, sha256 text, storage text, blob_id uuid, chunks integer)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_prompt convo.prompts := convo._held_prompt(worker_prompt_read.prompt_id, worker_prompt_read.worker,
                                                 'worker_prompt_read');
BEGIN
    RETURN QUERY
    SELECT 'block', c.message_id, c.message_position::bigint, c.role, c.block_position::integer, c.block_type,
           c.content, c.metadata, c.tool_call_id, c.tool_name, c.tool_input, c.tool_status, c.tool_output,
           c.tool_error, NULL::integer, NULL::uuid, NULL::text, NULL::text, NULL::bigint, NULL::text, NULL::text,
           NULL::uuid, NULL::integer
      FROM convo.prompt_context c
     WHERE c.prompt_id = worker_prompt_read.prompt_id
     ORDER BY c.message_position, c.block_position;
    IF EXISTS (SELECT 1 FROM convo.messages m
                 JOIN convo.message_files mf ON mf.message_id = m.id
                WHERE m.conversation_id = v_prompt.conversation_id) THEN
        RETURN QUERY
        SELECT 'file', f.message_id, f.message_position, NULL::text, NULL::integer, NULL::text, NULL::text,
               NULL::jsonb, NULL::uuid, NULL::text, NULL::jsonb, NULL::text, NULL::text, NULL::text,
               f.file_position, f.file_id, f.filename, f.media_type, f.size, f.sha256, f.storage, f.blob_id,
               f.chunks
          FROM convo._prompt_files(worker_prompt_read.prompt_id) f;
    END IF;
END;
$$;

-- file_chunk returns chunk seq (from 0; 256 KiB, the last may be shorter)
-- of file file_id of the context of a prompt worker holds: the chunks of
-- 0 .. chunks-1 (prompt_files) joined are the file's bytes. A worker
-- reads a file no other way, so that it reads only what its prompt's
-- model may see. Errors, changing nothing: CV001 unless worker holds the
-- prompt, or when the prompt's context holds no file file_id (another
-- conversation's file, or one of a message off the prompt's path, alike);
-- CV003 for a file whose bytes are in S3 (read them from the bucket: the
-- key is prompt_files' blob_id) and for a seq outside 0 .. chunks-1.
CREATE OR REPLACE FUNCTION convo.file_chunk(prompt_id uuid, worker text, file_id uuid, seq integer) RETURNS bytea
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_file record;
    v_data bytea;
BEGIN
    PERFORM convo._held_prompt(file_chunk.prompt_id, file_chunk.worker, 'file_chunk');
    SELECT * INTO v_file FROM convo._prompt_files(file_chunk.prompt_id) pf
     WHERE pf.file_id = file_chunk.file_id LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'file_chunk: file % is not held by a message of the context of prompt %', file_chunk.file_id,
            file_chunk.prompt_id USING ERRCODE = 'CV001', HINT = 'prompt_files lists the files the prompt may read';
    END IF;
    IF v_file.storage <> 'postgres' THEN
        RAISE EXCEPTION 'file_chunk: the bytes of file % (%) are in %, not in PostgreSQL: read the object % from the bucket',
            file_chunk.file_id, v_file.filename, v_file.storage, v_file.blob_id USING ERRCODE = 'CV003';
    END IF;
    IF file_chunk.seq IS NULL OR file_chunk.seq < 0 OR file_chunk.seq >= v_file.chunks THEN
        RAISE EXCEPTION 'file_chunk: seq % is out of range: file % (%) has % chunks of 256 KiB, 0 to %',
            coalesce(file_chunk.seq::text, 'NULL'), file_chunk.file_id, v_file.filename, v_file.chunks, v_file.chunks - 1
            USING ERRCODE = 'CV003';
    END IF;
    SELECT c.data INTO v_data FROM convo.file_chunks c WHERE c.blob_id = v_file.blob_id AND c.seq = file_chunk.seq;
    IF NOT FOUND THEN
        -- The blob's chunks are written before its file exists, and go
        -- only with it: a missing chunk is a broken store, said as such.
        RAISE EXCEPTION 'file_chunk: chunk % of file % (blob %) is missing from convo.file_chunks', file_chunk.seq,
            file_chunk.file_id, v_file.blob_id;
    END IF;
    RETURN v_data;
END;
$$;

-- prompt_trace returns what a worker needs to continue a prompt's trace
-- (docs/operations.md, "OpenTelemetry"): trace_context, the W3C trace
-- context (a JSON object of strings: "traceparent", perhaps "tracestate")
-- of the request that queued the prompt, NULL when it came with none; and
-- queued_seconds, how long ago (by the database's clock, at the caller's
-- transaction start) the prompt was queued. CV001 unless worker holds the
-- prompt. Not STABLE: called in the query that claims the prompt
-- (db/queries/worker/worker.sql), it must see the claim.
CREATE OR REPLACE FUNCTION convo.prompt_trace(prompt_id uuid, worker text)
RETURNS TABLE (trace_context jsonb, queued_seconds double precision)
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt convo.prompts;
BEGIN
    v_prompt := convo._held_prompt(prompt_trace.prompt_id, prompt_trace.worker, 'prompt_trace');
    trace_context := v_prompt.trace_context;
    queued_seconds := greatest(extract(epoch FROM now() - v_prompt.created_at), 0);
    RETURN NEXT;
END;
$$;
