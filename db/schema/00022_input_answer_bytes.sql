-- +goose Up

-- A snapshot (a stream's, GetConversation's) carries the open input
-- requests of its conversation, and an answered request its answer, up to
-- the snapshot's byte budget (CONVO_SNAPSHOT_BYTES). Sizing an answer by
-- pg_column_size counts it compressed: 100,000 repeated characters count
-- about 1 KB, so a hundred such answers fit a 256 KiB budget and make a
-- snapshot of 10 MB or more. answer_bytes is the answer's size as the
-- snapshot carries it (its JSON text), computed once when it is written,
-- so that sizing reads a number, not the answer.
ALTER TABLE convo.input_requests
    ADD COLUMN answer_bytes bigint GENERATED ALWAYS AS (octet_length(answer::text)) STORED;

-- +goose Down
ALTER TABLE convo.input_requests DROP COLUMN answer_bytes;
