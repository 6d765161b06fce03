-- name: ResponseDelete :exec
-- Deletes a reply from OpenAI's Responses API (its messages stay); see
-- convo.delete_response.
SELECT convo.delete_response(@owner_id::text, @prompt_id::uuid);

-- name: ResponseDeleted :one
-- Whether a reply was deleted from OpenAI's Responses API.
SELECT EXISTS (SELECT 1 FROM convo.deleted_responses d WHERE d.prompt_id = @prompt_id::uuid) AS deleted;
