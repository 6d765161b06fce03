-- name: ComparisonVote :exec
SELECT convo.vote_comparison(@owner_id::text, @id::uuid, @preference::text);

-- name: ComparisonList :many
-- The comparisons of the conversations user_id owns or is a member of
-- (of one conversation, when conversation_id is given), newest first, after the (after_time, after_id) cursor, with both
-- sides' prompts. Also serves single look-ups through only_id.
SELECT cmp.id, cmp.conversation_id, cmp.user_message_id, cmp.preference, cmp.voted_at, cmp.created_at,
       pa.id AS a_prompt_id, pa.message_id AS a_message_id, pa.model_config AS a_model_config, pa.status AS a_status,
       pb.id AS b_prompt_id, pb.message_id AS b_message_id, pb.model_config AS b_model_config, pb.status AS b_status
  FROM convo.comparisons cmp
  JOIN convo.conversations c ON c.id = cmp.conversation_id
  JOIN convo.prompts pa ON pa.id = cmp.prompt_a
  JOIN convo.prompts pb ON pb.id = cmp.prompt_b
 WHERE (c.owner_id = @user_id::text OR EXISTS (SELECT 1 FROM convo.members mm WHERE mm.conversation_id = c.id AND mm.user_id = @user_id::text))
   AND (sqlc.narg(only_id)::uuid IS NULL OR cmp.id = sqlc.narg(only_id)::uuid)
   AND (sqlc.narg(conversation_id)::uuid IS NULL OR cmp.conversation_id = sqlc.narg(conversation_id)::uuid)
   AND (sqlc.narg(after_time)::timestamptz IS NULL
        OR (cmp.created_at, cmp.id) < (sqlc.narg(after_time)::timestamptz, sqlc.narg(after_id)::uuid))
 ORDER BY cmp.created_at DESC, cmp.id DESC
 LIMIT @max_rows::int;
