-- Files (docs/files.md): the metadata package files keeps in PostgreSQL,
-- and the chunks of the PostgreSQL blob store.

-- name: FileBlobCreatePending :exec
-- A pending blob (sha256 NULL) for an upload about to be written.
INSERT INTO convo.file_blobs (id, owner, storage) VALUES (@id::uuid, @owner::text, @storage::text);

-- name: FileBlobDeletePending :exec
-- Deletes the blob row id while it is pending (its chunks go with it);
-- never a blob a file may point to.
DELETE FROM convo.file_blobs WHERE id = @id::uuid AND sha256 IS NULL;

-- name: FileOwnerLock :exec
-- Serialises the commits of one owner's uploads, and the collector's
-- release of that owner's blobs, until the transaction ends: the quota sum
-- and the dedupe lookup then see every other commit of the owner.
SELECT pg_advisory_xact_lock(hashtextextended('convo.files:' || @owner::text, 0));

-- name: FileBlobBySHA256 :many
-- The owner's committed blob of these bytes (none or one).
SELECT id FROM convo.file_blobs WHERE owner = @owner::text AND sha256 = @sha256::text;

-- name: FileOwnerBytes :one
-- The bytes the owner's committed blobs hold (each content once).
SELECT coalesce(sum(size), 0)::bigint AS bytes
  FROM convo.file_blobs WHERE owner = @owner::text AND sha256 IS NOT NULL;

-- name: FileBlobCommit :execrows
-- Gives the pending blob its content's sha256 and size: it is committed.
UPDATE convo.file_blobs SET sha256 = @sha256::text, size = @size::bigint
 WHERE id = @id::uuid AND sha256 IS NULL;

-- name: FileInsert :one
INSERT INTO convo.files (id, owner, blob_id, filename, media_type, size, sha256)
VALUES (@id::uuid, @owner::text, @blob_id::uuid, @filename::text, @media_type::text, @size::bigint, @sha256::text)
RETURNING created_at;

-- name: FileGet :one
-- The owner's file id with its blob and the blob's store.
SELECT f.id, f.owner, f.filename, f.media_type, f.size, f.sha256, f.created_at, f.blob_id, b.storage
  FROM convo.files f
  JOIN convo.file_blobs b ON b.id = f.blob_id
 WHERE f.id = @id::uuid AND f.owner = @owner::text;

-- name: FileChunkInsert :exec
INSERT INTO convo.file_chunks (blob_id, seq, data) VALUES (@blob_id::uuid, @seq::int, @data::bytea);

-- name: FileChunks :many
-- The chunks of blob_id numbered from_seq up to, not including, to_seq:
-- an index range scan of exactly those.
SELECT seq, data FROM convo.file_chunks
 WHERE blob_id = @blob_id::uuid AND seq >= @from_seq::int AND seq < @to_seq::int
 ORDER BY seq;

-- name: FileChunkFirstExists :one
-- Whether blob_id has bytes in PostgreSQL (every stored blob has chunk 0).
SELECT EXISTS (SELECT 1 FROM convo.file_chunks WHERE blob_id = @blob_id::uuid AND seq = 0);

-- name: FileChunksDelete :exec
DELETE FROM convo.file_chunks WHERE blob_id = @blob_id::uuid;

-- name: FilesCollect :execrows
-- Deletes up to max_rows files that no message holds and that are older
-- than older_than_seconds. A file a transaction is attaching to a message
-- right now is locked (by the foreign key's check) and skipped.
DELETE FROM convo.files f
 WHERE f.id IN (
    SELECT c.id FROM convo.files c
     WHERE c.created_at < now() - make_interval(secs => @older_than_seconds::double precision)
       AND NOT EXISTS (SELECT 1 FROM convo.message_files m WHERE m.file_id = c.id)
     LIMIT @max_rows::int
       FOR UPDATE SKIP LOCKED)
   AND NOT EXISTS (SELECT 1 FROM convo.message_files m WHERE m.file_id = f.id);

-- name: FileBlobsUnreferenced :many
-- Up to max_rows committed blobs no file points to, with their owners.
SELECT b.id, b.owner FROM convo.file_blobs b
 WHERE b.sha256 IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM convo.files f WHERE f.blob_id = b.id)
 LIMIT @max_rows::int;

-- name: FileBlobsRelease :many
-- Turns the blobs ids that still no file points to back into pending
-- ones, so that no upload can share them any more; run under the owners'
-- locks (FileOwnerLock). Returns the ids released.
UPDATE convo.file_blobs b SET sha256 = NULL
 WHERE b.id = ANY (@ids::uuid[]) AND b.sha256 IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM convo.files f WHERE f.blob_id = b.id)
RETURNING b.id;

-- name: FileBlobsPendingBefore :many
-- Up to max_rows pending blobs older than older_than_seconds: uploads that
-- never finished (the process died), and blobs the collector released.
SELECT id FROM convo.file_blobs
 WHERE sha256 IS NULL AND created_at < now() - make_interval(secs => @older_than_seconds::double precision)
 ORDER BY created_at
 LIMIT @max_rows::int;

-- name: FileTextIndex :one
-- What search keeps of a text file's text (00028_file_text_search.sql):
-- the head snippets are cut from, its first 10,000 characters, and its
-- vector (convo._file_text_vector, which never fails for the text's size
-- or words), as text, for FileTextInsert. Run outside the upload's
-- transaction: parsing the text is the costly part, and the transaction
-- holds the owner's lock.
SELECT left(@text::text, 10000)::text AS head, convo._file_text_vector(@text::text)::text AS vector;

-- name: FileTextInsert :exec
-- Records what FileTextIndex computed as what search finds the file by.
INSERT INTO convo.file_texts (file_id, owner, head, search_vector)
VALUES (@file_id::uuid, @owner::text, @head::text, @vector::tsvector);
