-- name: MessageRegenerate :one
-- Queues a new version of a reply (a sibling, the old one kept) and shows
-- it; see convo.regenerate_reply.
SELECT r.message_id::uuid AS message_id, r.prompt_id::uuid AS prompt_id
  FROM convo.regenerate_reply(@owner_id::text, @conversation_id::uuid, sqlc.narg(message_id)::uuid,
                              sqlc.narg(model_config)::jsonb) r;

-- name: MessageEdit :one
-- Makes a new version of a user message (a sibling, the old one kept)
-- with a queued reply, and shows it; see convo.edit_message.
SELECT e.user_message_id::uuid AS user_message_id, e.assistant_message_id::uuid AS assistant_message_id,
       e.prompt_id::uuid AS prompt_id
  FROM convo.edit_message(@owner_id::text, @conversation_id::uuid, @message_id::uuid, @text::text,
                          sqlc.narg(model_config)::jsonb, @file_ids::uuid[]) e;

-- name: BranchSwitch :one
-- Shows the version of the conversation below message_id and returns the
-- new active leaf; see convo.switch_branch.
SELECT convo.switch_branch(@owner_id::text, @conversation_id::uuid, @message_id::uuid)::uuid AS leaf_message_id;

-- name: BranchSwitchVersion :one
-- Shows version sibling_index of message_id's turn and returns the new
-- active leaf; see convo.switch_version.
SELECT convo.switch_version(@owner_id::text, @conversation_id::uuid, @message_id::uuid,
                            @sibling_index::integer)::uuid AS leaf_message_id;

-- name: BranchSetEventBytes :exec
-- Sets this session's bound on the messages of a branchSwitched
-- (convo.snapshot_bytes, read by convo._event_bytes); see
-- postgres.SetSnapshotBytes.
SELECT set_config('convo.snapshot_bytes', @max_bytes::text, false);

-- name: BranchSetEventBytesLocal :exec
-- Sets the bound on the messages of a branchSwitched (convo.snapshot_bytes)
-- for the calling transaction only, so that it holds through a transaction
-- pooler; see Store.SetSnapshotBytes.
SELECT set_config('convo.snapshot_bytes', @max_bytes::text, true);

-- name: BranchSetTraceContextLocal :exec
-- Sets the W3C trace context (a JSON object, postgres.traceContext) the
-- prompts queued in the calling transaction keep (convo._trace_context),
-- for that transaction only: a regenerated or edited reply, or a send
-- after a message, continues the trace of the request that asked for it.
SELECT set_config('convo.trace_context', @trace_context::text, true);

-- name: BranchSendAfter :one
-- Sends text as the user's message following after_message_id, its
-- branch shown first, all or nothing; see convo.send_after.
SELECT s.user_message_id::uuid AS user_message_id, s.prompt_id::uuid AS prompt_id
  FROM convo.send_after(@owner_id::text, @conversation_id::uuid, @after_message_id::uuid, @text::text,
                        sqlc.narg(model_config)::jsonb, @file_ids::uuid[]) s;
