-- +goose Up

-- Files in conversations (docs/files.md): images, PDFs, documents a user
-- uploads and messages hold. Their metadata is here; their bytes are in
-- convo.file_chunks (the PostgreSQL store, the default) or an
-- S3-compatible store, whichever file_blobs.storage names.

-- A blob is the bytes of one upload, kept once per owner and content:
-- uploads of the same bytes by the same owner share one blob (unique
-- (owner, sha256)). sha256 is NULL while the bytes are being written and
-- once the collector has given the blob up (a pending blob); it is set,
-- with size, when the upload is committed.
CREATE TABLE convo.file_blobs (
    id         uuid        PRIMARY KEY,
    owner      text        NOT NULL CHECK (owner <> ''),
    sha256     text        CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    size       bigint      NOT NULL DEFAULT 0 CHECK (size >= 0),
    storage    text        NOT NULL CHECK (storage IN ('postgres', 's3')),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Dedupe: an owner's blob by its content; it also sums the owner's stored
-- bytes for the quota (size is included, so that sum reads the index only).
CREATE UNIQUE INDEX file_blobs_owner_sha256_idx
    ON convo.file_blobs (owner, sha256) INCLUDE (size) WHERE sha256 IS NOT NULL;
-- The collector: pending blobs by age (an upload that crashed).
CREATE INDEX file_blobs_pending_idx ON convo.file_blobs (created_at) WHERE sha256 IS NULL;

-- The bytes of a blob stored in PostgreSQL, in chunks of 256 KiB (the last
-- may be shorter), numbered from 0. A range read reads only the chunks it
-- spans.
CREATE TABLE convo.file_chunks (
    blob_id uuid    NOT NULL REFERENCES convo.file_blobs (id) ON DELETE CASCADE,
    seq     integer NOT NULL CHECK (seq >= 0),
    data    bytea   NOT NULL CHECK (length(data) BETWEEN 1 AND 262144),
    PRIMARY KEY (blob_id, seq)
);
-- The chunks are already compressed more often than not (images, PDFs):
-- TOAST's compression would cost CPU and gain nothing.
ALTER TABLE convo.file_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

-- A file is one upload as its owner named it: its own id and filename,
-- the media type decided from its bytes, and the blob holding the bytes
-- (shared with the owner's other files of the same content).
CREATE TABLE convo.files (
    id         uuid        PRIMARY KEY,
    owner      text        NOT NULL CHECK (owner <> ''),
    blob_id    uuid        NOT NULL REFERENCES convo.file_blobs (id),
    filename   text        NOT NULL CHECK (filename <> '' AND octet_length(filename) <= 255),
    media_type text        NOT NULL CHECK (media_type <> ''),
    size       bigint      NOT NULL CHECK (size > 0),
    sha256     text        NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- An owner's files, newest first.
CREATE INDEX files_owner_idx ON convo.files (owner, created_at DESC, id DESC);
-- The collector: the files of a blob.
CREATE INDEX files_blob_idx ON convo.files (blob_id);

-- The files a message holds, in order. A file is kept while a message
-- holds it; deleting the message (or its conversation) releases it, and
-- the collector removes it once it is older than the grace period.
CREATE TABLE convo.message_files (
    message_id uuid    NOT NULL REFERENCES convo.messages (id) ON DELETE CASCADE,
    file_id    uuid    NOT NULL REFERENCES convo.files (id),
    position   integer NOT NULL CHECK (position >= 0),
    PRIMARY KEY (message_id, position)
);

-- The collector: is a file held by any message?
CREATE INDEX message_files_file_idx ON convo.message_files (file_id);

-- +goose Down
DROP TABLE convo.message_files;
DROP TABLE convo.files;
DROP TABLE convo.file_chunks;
DROP TABLE convo.file_blobs;
