-- name: ConnectionLimits :one
-- The connections PostgreSQL gives roles that are not superusers, for the
-- check of a server's pools at start (postgres.CheckConnections).
SELECT current_setting('max_connections')::int AS max_connections,
       current_setting('superuser_reserved_connections')::int AS superuser_reserved;
