-- +goose Up

-- release_prompt hands a prompt that worker claimed but never started back
-- to the queue at once, instead of when its lease expires: a worker that
-- is shutting down calls it for the prompts it holds. It returns false,
-- changing nothing, when the prompt is not a queued prompt held by worker
-- (a running prompt cannot be handed over: readers have seen its partial
-- reply; a worker fails it instead). Notifies "convo_prompts" with
-- 'queued:<prompt id>', so an idle worker takes it.
-- +goose StatementBegin
CREATE FUNCTION convo.release_prompt(prompt_id uuid, worker text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE convo.prompts p
       SET worker = NULL, lease_seconds = NULL, lease_expires_at = NULL
     WHERE p.id = release_prompt.prompt_id
       AND p.worker = release_prompt.worker
       AND p.status = 'queued';
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM pg_notify('convo_prompts', 'queued:' || release_prompt.prompt_id::text);
    RETURN true;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION convo.release_prompt(uuid, text);
