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
-- Full-text search over the text blocks of the conversations owner_id
-- (the caller) owns or is a member of, and over the caller's own text
-- files (a file another member attached is not searched), one row
-- per message (its best-matching block: a text block, or the file block
-- of a file whose text matches), best match first. Matching and ranking
-- read stored vectors, blocks.search_vector (00012_search_vector.sql) and
-- file_texts.search_vector (00028_file_text_search.sql), and never parse
-- text. Matching reads only the owner's: the block index is keyed by the
-- words and by each block's conversation (00024_batched_ends_owner_search.sql), and
-- the match asks for both, the caller's conversation ids (owned and
-- shared, convo.members) as an array that
-- the index looks up (its expression, ARRAY[conversation_id], must stay
-- as it is written there); the file index is keyed by the words and the
-- owner (ARRAY[owner], likewise), so other owners' matches are never
-- read. A file matches through the messages that hold it
-- (convo.message_files: a file no message holds finds nothing, and a
-- deleted message or conversation takes its holds with it). The work is
-- bounded whatever the owner holds: ranking reads the vectors of the
-- 1,000 most recent matching blocks and the 200 most recent matching
-- files at most (a file's vector covers up to 1 MiB of text, a block's
-- 100,000 characters), and only the snippets of the page returned are
-- computed from text, each from the first 10,000 characters of the block
-- or the file. The snippet marks matches with U+E000 … U+E001, private-use
-- characters that the Go side turns into highlight ranges, so no markup
-- is ever mixed with message text.
WITH query AS (
    SELECT websearch_to_tsquery('english', @query::text) AS q
), match AS (
    SELECT b.message_id, b.id AS block_id, b.search_vector
      FROM query, convo.blocks b
     WHERE ARRAY[b.conversation_id] && ARRAY(SELECT c.id FROM convo.conversations c WHERE c.owner_id = @owner_id::text
                                              UNION ALL
                                             SELECT mm.conversation_id FROM convo.members mm WHERE mm.user_id = @owner_id::text)
       AND b.block_type = 'text'
       AND b.search_vector @@ query.q
     ORDER BY b.created_at DESC, b.id
     LIMIT 1000
), file_match AS (
    SELECT ft.file_id, ft.search_vector
      FROM query, convo.file_texts ft
     WHERE ARRAY[ft.owner] && ARRAY[@owner_id::text]
       AND ft.search_vector @@ query.q
     ORDER BY ft.created_at DESC, ft.file_id
     LIMIT 200
), candidate AS (
    SELECT match.message_id, match.block_id, NULL::uuid AS file_id, ts_rank(match.search_vector, query.q) AS rank
      FROM match, query
    UNION ALL
    SELECT mf.message_id, NULL::uuid, fm.file_id, fm.rank
      FROM (SELECT file_match.file_id, ts_rank(file_match.search_vector, query.q) AS rank FROM file_match, query) fm
      JOIN convo.message_files mf ON mf.file_id = fm.file_id
), hit AS (
    -- A message whose text and files match is one result, at its best
    -- match's rank (its text block's on a tie).
    SELECT DISTINCT ON (candidate.message_id) candidate.message_id, candidate.block_id, candidate.file_id, candidate.rank
      FROM candidate
     ORDER BY candidate.message_id, candidate.rank DESC, candidate.file_id NULLS FIRST, candidate.block_id
), page AS (
    SELECT hit.message_id, hit.block_id, hit.file_id, hit.rank, m.created_at
      FROM hit
      JOIN convo.messages m ON m.id = hit.message_id
      JOIN convo.conversations c ON c.id = m.conversation_id
     WHERE (c.owner_id = @owner_id::text
            OR EXISTS (SELECT 1 FROM convo.members mm WHERE mm.conversation_id = c.id AND mm.user_id = @owner_id::text))
     ORDER BY hit.rank DESC, m.created_at DESC, hit.message_id
     LIMIT @max_rows::int
)
SELECT page.message_id, m.conversation_id, c.title AS conversation_title, m.role, m.created_at,
       coalesce(page.block_id,
                (SELECT fb.id FROM convo.blocks fb
                  WHERE fb.message_id = page.message_id AND fb.block_type = 'file'
                    AND fb.metadata->>'fileId' = page.file_id::text
                  ORDER BY fb.position LIMIT 1))::uuid AS block_id,
       page.rank::float8 AS rank,
       ts_headline('english', coalesce(left(b.content, 10000), ft.head), query.q,
                   'StartSel=' || chr(57344) || ', StopSel=' || chr(57345) ||
                   ', MaxWords=30, MinWords=12, MaxFragments=2')::text AS snippet
  FROM page
  JOIN convo.messages m ON m.id = page.message_id
  JOIN convo.conversations c ON c.id = m.conversation_id
  LEFT JOIN convo.blocks b ON b.id = page.block_id
  LEFT JOIN convo.file_texts ft ON ft.file_id = page.file_id
 CROSS JOIN query
 ORDER BY page.rank DESC, page.created_at DESC, page.message_id;
