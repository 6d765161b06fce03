-- +goose Up

-- Search finds the text of text files (docs/files.md, "Search").
--
-- convo.file_texts holds, per uploaded file whose media type is text/*,
-- what SearchMessages reads of it: a tsvector of its text, computed once
-- when the upload commits (package files reads the text as the bytes
-- stream into storage, at most its first MiB, whichever store keeps
-- them), and head, the text's first 10,000 characters, which snippets
-- are cut from. Other files (images, PDFs, anything not text/*) have no
-- row. A row goes with its file (the collector deletes the file).
--
-- The GIN index keys each vector by its words and by its owner, as
-- 00024_batched_ends_owner_search.sql keys blocks by their conversation:
-- a search asks for the words AND the caller (ARRAY[owner], an
-- expression db/queries/search.sql must write exactly so), and never
-- reads another owner's matches.
CREATE TABLE convo.file_texts (
    file_id       uuid        PRIMARY KEY REFERENCES convo.files (id) ON DELETE CASCADE,
    owner         text        NOT NULL CHECK (owner <> ''),
    head          text        NOT NULL,
    search_vector tsvector    NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX file_texts_search_idx ON convo.file_texts USING gin (search_vector, (ARRAY[owner]));

-- _file_text_vector as this version shipped it (db/functions/search.sql
-- holds the current definition): the backfill below needs it before the
-- functions are applied.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION convo._file_text_vector(p_text text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    LOOP
        BEGIN
            RETURN to_tsvector('english', p_text);
        EXCEPTION WHEN program_limit_exceeded THEN
            p_text := left(p_text, length(p_text) / 2);
        END;
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- The backfill: text files uploaded before this migration whose bytes are
-- in PostgreSQL (convo.file_chunks) are indexed here, from their first
-- MiB (four chunks), as an upload now is. Files kept in S3 are not (the
-- database cannot read the bucket): they are not found by search.
--
-- _file_text_decode reads bytes as UTF-8 as package files does: an
-- invalid byte (or a NUL, which text cannot hold) becomes U+FFFD, and a
-- sequence cut by the 1 MiB cap at the end is dropped. Bytes that are
-- valid UTF-8 (nearly every text file) are decoded by convert_from at
-- once; others byte by byte, about a second per MiB.
-- +goose StatementBegin
CREATE FUNCTION convo._file_text_decode(p_bytes bytea) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_parts text[] := '{}';
    v_n     integer := length(p_bytes);
    v_i     integer := 0;
    v_start integer := 0;
    v_c     integer;
    v_len   integer;
    v_j     integer;
    v_ok    boolean;
BEGIN
    -- Valid, or valid but for a sequence the cap cut at the end.
    FOR v_j IN 0 .. 3 LOOP
        BEGIN
            RETURN convert_from(substring(p_bytes FROM 1 FOR v_n - v_j), 'UTF8');
        EXCEPTION WHEN character_not_in_repertoire OR untranslatable_character THEN
            NULL;
        END;
    END LOOP;
    WHILE v_i < v_n LOOP
        v_c := get_byte(p_bytes, v_i);
        v_len := CASE WHEN v_c BETWEEN 1 AND 127 THEN 1
                      WHEN v_c BETWEEN 194 AND 223 THEN 2
                      WHEN v_c BETWEEN 224 AND 239 THEN 3
                      WHEN v_c BETWEEN 240 AND 244 THEN 4
                      ELSE 0 END;
        v_ok := v_len > 0 AND v_i + v_len <= v_n;
        v_j := 1;
        WHILE v_ok AND v_j < v_len LOOP
            v_ok := get_byte(p_bytes, v_i + v_j) BETWEEN 128 AND 191;
            v_j := v_j + 1;
        END LOOP;
        IF v_ok AND v_len >= 3 THEN
            -- No overlong form, no surrogate, nothing past U+10FFFF.
            v_j := get_byte(p_bytes, v_i + 1);
            v_ok := NOT ((v_c = 224 AND v_j < 160) OR (v_c = 237 AND v_j >= 160)
                         OR (v_c = 240 AND v_j < 144) OR (v_c = 244 AND v_j >= 144));
        END IF;
        IF v_ok THEN
            v_i := v_i + v_len;
        ELSIF v_len > 1 AND v_i + v_len > v_n AND v_c <> 0 THEN
            -- A sequence the cap cut at the end: dropped.
            EXIT;
        ELSE
            v_parts := v_parts || convert_from(substring(p_bytes FROM v_start + 1 FOR v_i - v_start), 'UTF8');
            v_parts := v_parts || U&'\FFFD'::text;
            v_i := v_i + 1;
            v_start := v_i;
        END IF;
    END LOOP;
    v_parts := v_parts || convert_from(substring(p_bytes FROM v_start + 1 FOR v_i - v_start), 'UTF8');
    RETURN array_to_string(v_parts, '');
END;
$$;
-- +goose StatementEnd

INSERT INTO convo.file_texts (file_id, owner, head, search_vector, created_at)
SELECT f.id, f.owner, left(t.text, 10000), convo._file_text_vector(t.text), f.created_at
  FROM convo.files f
  JOIN convo.file_blobs b ON b.id = f.blob_id AND b.storage = 'postgres'
 CROSS JOIN LATERAL (
       SELECT convo._file_text_decode(substring(string_agg(c.data, ''::bytea ORDER BY c.seq) FROM 1 FOR 1048576)) AS text
         FROM convo.file_chunks c
        WHERE c.blob_id = f.blob_id AND c.seq < 4) t
 WHERE f.media_type LIKE 'text/%' AND t.text IS NOT NULL;

DROP FUNCTION convo._file_text_decode(bytea);

-- +goose Down
DROP TABLE convo.file_texts;
DROP FUNCTION IF EXISTS convo._file_text_vector(text);
