-- name: SearchBegin :one
-- Starts a search's transaction: sets its statement timeout (such as
-- '3000ms'; '0': none) and says whether the query has any lexeme to look
-- for (a query of stop words and punctuation has none, and finds nothing)
-- and whether it can use the index (querytree is 'T' for a query that only
-- excludes, such as !'word' or 'a' | !'b': it matches nearly every block,
-- and a GIN index answers it by reading all of itself).
SELECT set_config('statement_timeout', @timeout::text, true) AS timeout,
       numnode(q) > 0 AS has_lexemes,
       querytree(q) <> 'T' AS indexable
  FROM websearch_to_tsquery('english', @query::text) q;

-- name: MessageSearch :many
-- Full-text search over the owner's text blocks, one row per message (its
-- best-matching block), best match first. Matching and ranking read the
-- stored blocks.search_vector (00012_search_vector.sql) and never parse
-- text. Matching reads only the owner's blocks: the index is keyed by the
-- words and by each block's conversation (00024_batched_ends_owner_search.sql), and
-- the match asks for both, the owner's conversation ids as an array that
-- the index looks up (its expression, ARRAY[conversation_id], must stay
-- as it is written there), so other owners' matches are never read. The
-- work is bounded whatever the owner holds: ranking reads
-- the vectors of the 1,000 most recent matching blocks at most (a word in
-- every message ranks the newest 1,000), and only the snippets of the page
-- returned are computed from text, each from the block's first 10,000
-- characters. The snippet marks matches with U+E000 … U+E001, private-use
-- characters that the Go side turns into highlight ranges, so no markup
-- is ever mixed with message text.
WITH query AS (
    SELECT websearch_to_tsquery('english', @query::text) AS q
), match AS (
    SELECT b.message_id, b.id AS block_id, b.search_vector
      FROM query, convo.blocks b
     WHERE ARRAY[b.conversation_id] && ARRAY(SELECT c.id FROM convo.conversations c WHERE c.owner_id = @owner_id::text)
       AND b.block_type = 'text'
       AND b.search_vector @@ query.q
     ORDER BY b.created_at DESC, b.id
     LIMIT 1000
), hit AS (
    SELECT DISTINCT ON (match.message_id) match.message_id, match.block_id, ts_rank(match.search_vector, query.q) AS rank
      FROM match, query
     ORDER BY match.message_id, rank DESC
), page AS (
    SELECT hit.message_id, hit.block_id, hit.rank, m.created_at
      FROM hit
      JOIN convo.messages m ON m.id = hit.message_id
     ORDER BY hit.rank DESC, m.created_at DESC, hit.message_id
     LIMIT @max_rows::int
)
SELECT page.message_id, m.conversation_id, c.title AS conversation_title, m.role, m.created_at,
       page.rank::float8 AS rank,
       ts_headline('english', left(b.content, 10000), query.q,
                   'StartSel=' || chr(57344) || ', StopSel=' || chr(57345) ||
                   ', MaxWords=30, MinWords=12, MaxFragments=2')::text AS snippet
  FROM page
  JOIN convo.messages m ON m.id = page.message_id
  JOIN convo.conversations c ON c.id = m.conversation_id
  JOIN convo.blocks b ON b.id = page.block_id
 CROSS JOIN query
 ORDER BY page.rank DESC, page.created_at DESC, page.message_id;
