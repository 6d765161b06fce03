-- Compaction merges the delta events of finished prompts (docs/operations.md).
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), so a change to a function is
-- an edit here. See db/README.md.

-- compact_prompt compacts one finished prompt's delta events and returns
-- how many event rows it removed (0 when it was already compacted). It
-- raises CV001 for an unknown prompt and CV002 for one still queued or
-- running: a streaming block's text lives only in its deltas.
CREATE OR REPLACE FUNCTION convo.compact_prompt(prompt_id uuid) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt  convo.prompts;
    v_removed integer;
BEGIN
    SELECT * INTO v_prompt FROM convo.prompts p WHERE p.id = compact_prompt.prompt_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'compact_prompt: prompt % does not exist', compact_prompt.prompt_id USING ERRCODE = 'CV001';
    END IF;
    IF v_prompt.status NOT IN ('completed', 'failed', 'cancelled') THEN
        RAISE EXCEPTION 'compact_prompt: prompt % is %; only finished prompts can be compacted',
            v_prompt.id, v_prompt.status USING ERRCODE = 'CV002';
    END IF;
    IF v_prompt.compacted_at IS NOT NULL THEN
        RETURN 0;
    END IF;

    -- runs numbers the prompt's events so that each run of consecutive
    -- deltas of one block shares a number; merged keeps each run of two or
    -- more in its first event, with the length (in characters) of each
    -- delta it replaces: mergedLengths, so that a reader can split the run
    -- at its original boundaries (the OpenAI Responses API numbers its
    -- events by the deltas, and a replay after compaction must number them
    -- as the live stream did).
    WITH marked AS (
        SELECT e.seq, e.kind, e.block_id,
               CASE WHEN e.kind = 'blockDelta'
                     AND lag(e.kind) OVER w = 'blockDelta'
                     AND lag(e.block_id) OVER w = e.block_id
                    THEN 0 ELSE 1 END AS starts_run
          FROM convo.events e
         WHERE e.conversation_id = v_prompt.conversation_id AND e.prompt_id = v_prompt.id
        WINDOW w AS (ORDER BY e.seq)
    ), runs AS (
        SELECT seq, kind, sum(starts_run) OVER (ORDER BY seq) AS run FROM marked
    ), merged AS (
        SELECT r.run, min(r.seq) AS keep_seq,
               string_agg(e.payload->>'content', '' ORDER BY r.seq) AS content,
               jsonb_agg(length(e.payload->>'content') ORDER BY r.seq) AS lengths
          FROM runs r
          JOIN convo.events e ON e.conversation_id = v_prompt.conversation_id AND e.seq = r.seq
         WHERE r.kind = 'blockDelta'
         GROUP BY r.run
        HAVING count(*) > 1
    ), kept AS (
        UPDATE convo.events e
           SET payload = e.payload || jsonb_build_object('content', m.content, 'mergedLengths', m.lengths)
          FROM merged m
         WHERE e.conversation_id = v_prompt.conversation_id AND e.seq = m.keep_seq
        RETURNING e.seq
    ), removed AS (
        DELETE FROM convo.events e
         USING runs r JOIN merged m ON m.run = r.run
         WHERE e.conversation_id = v_prompt.conversation_id
           AND e.seq = r.seq AND r.seq <> m.keep_seq
        RETURNING e.seq
    )
    SELECT count(*) INTO v_removed FROM removed;

    UPDATE convo.prompts p SET compacted_at = now() WHERE p.id = v_prompt.id;
    RETURN v_removed;
END;
$$;

-- compact_events compacts up to max_prompts prompts that finished more
-- than older_than ago, oldest first, skipping prompts another session is
-- compacting, and returns how many prompts and event rows it compacted.
-- Servers call it periodically (CONVO_COMPACT_AFTER); it can also be run
-- by hand or from cron.
CREATE OR REPLACE FUNCTION convo.compact_events(older_than interval, max_prompts integer DEFAULT 100,
                                     OUT prompts integer, OUT events_removed bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_prompt_id uuid;
BEGIN
    IF older_than IS NULL OR older_than < interval '0' THEN
        RAISE EXCEPTION 'compact_events: older_than must be a non-negative interval, not %', older_than
            USING ERRCODE = 'CV003';
    END IF;
    IF max_prompts IS NULL OR max_prompts < 1 THEN
        RAISE EXCEPTION 'compact_events: max_prompts must be at least 1, not %', max_prompts
            USING ERRCODE = 'CV003';
    END IF;
    prompts := 0;
    events_removed := 0;
    FOR v_prompt_id IN
        SELECT p.id FROM convo.prompts p
         WHERE p.compacted_at IS NULL AND p.status IN ('completed', 'failed', 'cancelled')
           AND p.ended_at < now() - older_than
         ORDER BY p.ended_at
         LIMIT max_prompts
           FOR UPDATE SKIP LOCKED
    LOOP
        events_removed := events_removed + convo.compact_prompt(v_prompt_id);
        prompts := prompts + 1;
    END LOOP;
END;
$$;
