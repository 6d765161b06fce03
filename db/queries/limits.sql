-- name: LimitsSetMaxActivePrompts :exec
-- Sets the per-owner cap on queued and running prompts that
-- convo.send_message enforces (0: no cap); see convo._check_prompt_quota in db/functions/invariants.sql.
UPDATE convo.limits SET max_active_prompts = @max_active_prompts::int;
