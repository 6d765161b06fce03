-- name: ResponseDelete :exec
-- Deletes a reply from OpenAI's Responses API (its messages stay); see
-- convo.delete_response.
SELECT convo.delete_response(@owner_id::text, @prompt_id::uuid);

-- name: ResponseDeleted :one
-- Whether a reply was deleted from OpenAI's Responses API.
SELECT EXISTS (SELECT 1 FROM convo.deleted_responses d WHERE d.prompt_id = @prompt_id::uuid) AS deleted;

-- name: ConversationMetadataGet :one
-- The conversation's OpenAI metadata ({} when none was set). It does not
-- check ownership: callers reach it only for conversations whose
-- ownership they have checked.
SELECT coalesce((SELECT m.metadata FROM convo.conversation_metadata m WHERE m.conversation_id = @conversation_id::uuid),
                '{}')::jsonb AS metadata;

-- name: ConversationMetadataSet :execrows
-- Sets the owner's conversation's OpenAI metadata; no row when the
-- conversation is not the owner's.
INSERT INTO convo.conversation_metadata AS m (conversation_id, metadata)
SELECT c.id, @metadata::jsonb FROM convo.conversations c WHERE c.id = @conversation_id::uuid AND c.owner_id = @owner_id::text
    ON CONFLICT (conversation_id) DO UPDATE SET metadata = excluded.metadata;
