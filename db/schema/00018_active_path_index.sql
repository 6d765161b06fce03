-- +goose Up

-- Reads of a conversation (the stream's snapshot and its bounds,
-- GetConversation, ListMessages, the history export) take the active path
-- only (messages.on_active_path, 00016_branches.sql). Through the
-- (conversation_id, position) key they walk past every message off the
-- path, so after an edit of an early message a snapshot of a long
-- conversation read every later message of the old branch. This index
-- holds the path alone: on a conversation of 6,002 messages whose path is
-- the first edited turn (2 messages), the snapshot's tail read went from
-- 1.8 ms (307 buffers) to 0.07 ms (3 buffers).
CREATE INDEX messages_active_path_idx ON convo.messages (conversation_id, position) WHERE on_active_path;

-- +goose Down
DROP INDEX convo.messages_active_path_idx;
