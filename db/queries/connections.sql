-- name: ConnectionLimits :one
-- The connections PostgreSQL gives roles that are not superusers, for the
-- check of a server's pools at start (postgres.CheckConnections).
-- reserved_connections (PostgreSQL 16 on) is reserved for roles with
-- pg_use_reserved_connections; it is 0 where it does not exist.
SELECT current_setting('max_connections')::int AS max_connections,
       (current_setting('superuser_reserved_connections')::int
        + coalesce(current_setting('reserved_connections', true), '0')::int)::int AS superuser_reserved;
