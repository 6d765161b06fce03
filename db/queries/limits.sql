-- name: LimitsSetMaxActivePrompts :exec
-- Sets the per-owner cap on queued and running prompts that
-- convo.send_message enforces (0: no cap); see db/schema/00010_prompt_limits.sql.
UPDATE convo.limits SET max_active_prompts = @max_active_prompts::int;
