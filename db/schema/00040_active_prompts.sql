-- +goose Up

-- A conversation's unfinished prompts (queued or running): what a send
-- looks up first (the reply in flight, for its send policy), and what
-- ending a prompt looks up to pass the turn and the active prompt on
-- (_release_turn, _refresh_active_prompt), as cancel_prompt and
-- _check_no_reply_in_flight do. Through prompts_conversation_idx each of
-- them read every prompt the conversation ever had: a send's cost grew
-- with the conversation's length (a third of a send's time at about 140
-- replies). A conversation has few unfinished prompts at any time.
CREATE INDEX prompts_conversation_active_idx ON convo.prompts (conversation_id, created_at, id)
    WHERE status IN ('queued', 'running');

-- +goose Down
DROP INDEX convo.prompts_conversation_active_idx;
