-- name: ServerKey :many
-- Returns the key kept under name, storing key first when there is none
-- (the first process to ask keeps the one it generated). No row when
-- another transaction stored one meanwhile that this statement's snapshot
-- cannot see: the caller asks again.
WITH stored AS (
    INSERT INTO convo.server_keys (name, key) VALUES (@name::text, @key::bytea)
    ON CONFLICT (name) DO NOTHING
    RETURNING key
)
SELECT key FROM stored
UNION ALL
SELECT k.key FROM convo.server_keys k WHERE k.name = @name::text;
