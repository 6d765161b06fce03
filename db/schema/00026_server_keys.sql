-- +goose Up

-- Secrets every convo process of a deployment shares, by name: the key
-- that signs files' short-lived URLs ('file_url', docs/files.md, "Signed
-- URLs") when CONVO_FILE_URL_KEY does not set one. The first process that
-- needs a key stores one it generated; every other process reads it, so
-- that a URL one process signed is valid at any other.
CREATE TABLE convo.server_keys (
    name text PRIMARY KEY,
    key bytea NOT NULL CHECK (octet_length(key) >= 32),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE convo.server_keys;
