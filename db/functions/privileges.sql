-- Who may call what (docs/deploy.md, "The worker role"). db.Migrate
-- applies this file last, after every other file of functions/, on every
-- start: CREATE OR REPLACE resets a function to SECURITY INVOKER with no
-- SET, and a function new since the last start is executable by PUBLIC
-- (PostgreSQL's default), so both are put right here each time.
--
-- The role that migrates (the server's) owns every object of the schema
-- convo and needs no grant. The group role convo_worker (created by
-- db/schema/00021_worker_role.sql, or by the operator) may only call the
-- worker API below: it has USAGE on the schema, EXECUTE on these
-- functions and nothing else, no table, view or sequence. Each of these
-- functions runs as its owner (SECURITY DEFINER) with a fixed search_path,
-- so a caller's search_path or temporary objects cannot change what it
-- does; the functions they call, and the triggers their writes fire, run
-- as the owner too.

-- No function of convo is callable by PUBLIC: only by its owner, and by
-- the grants below.
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA convo FROM PUBLIC;

DO $$
DECLARE
    -- The worker API (docs/worker-api.md): the write functions, the
    -- claims, the pauses of the worker's side, and the reads that answer
    -- only about a prompt the calling worker holds (worker_reads.sql).
    -- Not here: the client functions (send_message, answer_input,
    -- cancel_prompt …, which trust the owner id they are given), the
    -- maintenance ones (compact_*, set_event_notify) and the views.
    v_worker_api text[] := ARRAY[
        'claim_prompt', 'claim_prompts', 'start_prompt', 'heartbeat', 'worker_heartbeat', 'release_prompt',
        'start_block', 'append_block', 'end_block',
        'start_tool_call', 'tool_call_progress', 'complete_tool_call', 'fail_tool_call',
        'complete_prompt', 'fail_prompt', 'expire_leases', 'write_batch',
        'request_input', 'wait_prompt', 'prompt_inputs',
        'worker_context', 'worker_reply', 'prompt_status', 'worker_batch_mark', 'prompt_files', 'file_chunk',
        'worker_prompt_read', 'prompt_trace'];
    v_name text;
    v_fn   regprocedure;
    v_role boolean := to_regrole('convo_worker') IS NOT NULL;
BEGIN
    IF v_role THEN
        -- What an operator (or an older version) granted beyond the list
        -- goes: the role holds exactly the grants below.
        EXECUTE 'REVOKE ALL ON ALL TABLES IN SCHEMA convo FROM convo_worker';
        EXECUTE 'REVOKE ALL ON ALL SEQUENCES IN SCHEMA convo FROM convo_worker';
        EXECUTE 'REVOKE ALL ON ALL FUNCTIONS IN SCHEMA convo FROM convo_worker';
        EXECUTE 'REVOKE CREATE ON SCHEMA convo FROM convo_worker';
        EXECUTE 'GRANT USAGE ON SCHEMA convo TO convo_worker';
    ELSE
        RAISE NOTICE 'there is no role convo_worker (this user may not create roles): workers must connect as the owner; '
            'docs/deploy.md ("The worker role") has the SQL an administrator runs to create it';
    END IF;
    FOREACH v_name IN ARRAY v_worker_api LOOP
        -- One signature per name (TestEveryFunctionIsInFunctions), so the
        -- name is enough, and a signature change needs no edit here.
        v_fn := ('convo.' || v_name)::regproc::oid::regprocedure;
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, convo, pg_temp', v_fn);
        IF v_role THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO convo_worker', v_fn);
        END IF;
    END LOOP;
END;
$$;
