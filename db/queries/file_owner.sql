-- name: FileOwner :many
-- The owner of file id (none or one row), for a signed URL, which names
-- the file alone.
SELECT owner FROM convo.files WHERE id = @id::uuid;
