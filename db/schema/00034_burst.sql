-- +goose Up

-- The first token under a burst of replies (docs/performance.md, "Many
-- replies at once"): functions only, defined in db/functions (applied
-- after the migrations): convo._claim_idle, which claim_prompts calls to
-- serve every owner who holds nothing in one pass, and
-- convo.worker_prompt_read, a worker's two reads at a prompt's start in
-- one call. Nothing to change in the tables.
SELECT 1;

-- +goose Down
DROP FUNCTION IF EXISTS convo.worker_prompt_read(uuid, text);
DROP FUNCTION IF EXISTS convo._claim_idle(text, integer, integer);
