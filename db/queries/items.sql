-- name: MessagesAppend :one
-- Appends messages without a reply at the active leaf; see
-- convo.append_messages.
SELECT convo.append_messages(@owner_id::text, @conversation_id::uuid, @items::jsonb)::uuid[] AS ids;

-- name: MessageDelete :exec
-- Deletes a message of the active path, the rest of the tree kept; see
-- convo.delete_message.
SELECT convo.delete_message(@owner_id::text, @conversation_id::uuid, @message_id::uuid);
