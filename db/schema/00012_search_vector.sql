-- +goose Up

-- Search reads a stored tsvector instead of parsing message text.
--
-- Until now the search index was an expression index on
-- to_tsvector('english', content): it found the matching blocks, but
-- ranking them and the snippet parsed the whole text of every match again,
-- on every search, so one search cost the length of everything it matched
-- (seconds for a hundred messages of 100 KB). blocks.search_vector keeps
-- the parsed text, and the GIN index is built on it: a search ranks with
-- the stored vector and never parses text but for the snippets of the page
-- it returns (a bounded excerpt, db/queries/search.sql).
--
-- The vector covers a text block's first 100,000 characters (a user's
-- message is at most 100,000 characters; a reply may be longer). The bound
-- also keeps every block's vector far below tsvector's 1 MB limit: a
-- reply of more than about a megabyte of distinct words made the old
-- index fail the end_block that stored it.
--
-- It is a generated column: PostgreSQL computes it when content is
-- written, which is once per block. A streaming block's text lives in its
-- blockDelta events and content stays '' until the block ends
-- (convo._end_block, also run for the open blocks of a prompt that
-- completes, fails or is cancelled), so appends never compute it and cost
-- the same however long the block is: a reply becomes searchable when its
-- block ends. A user's message is stored whole by send_message and is
-- searchable at once. Other block types (reasoning, structured, tool_use …)
-- are not searched and have no vector.
--
-- Adding a stored generated column rewrites convo.blocks and computes the
-- vector of every existing text block (the backfill), holding the table's
-- lock meanwhile: replies cannot end and messages cannot be sent until it
-- commits. Measured on 2 busy cores: 20 s for 100 MB of text (16 s for
-- the rewrite, 3.4 s for the index); see docs/deploy.md, "Upgrades and
-- migrations".
DROP INDEX convo.blocks_search_idx;

ALTER TABLE convo.blocks ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (CASE WHEN block_type = 'text' THEN to_tsvector('english', left(content, 100000)) END) STORED;

CREATE INDEX blocks_search_idx ON convo.blocks USING gin (search_vector) WHERE block_type = 'text';

-- +goose Down
DROP INDEX convo.blocks_search_idx;
ALTER TABLE convo.blocks DROP COLUMN search_vector;
CREATE INDEX blocks_search_idx ON convo.blocks
    USING gin (to_tsvector('english', content)) WHERE block_type = 'text';
