-- name: MessageSearch :many
-- Full-text search over the owner's text blocks, one row per message (its
-- best-matching block), best match first. The snippet marks matches with
-- U+E000 … U+E001, private-use characters that the Go side turns into
-- highlight ranges, so no markup is ever mixed with message text.
SELECT hit.message_id, hit.conversation_id, hit.conversation_title, hit.role, hit.created_at,
       hit.rank::float8 AS rank,
       ts_headline('english', hit.content, websearch_to_tsquery('english', @query::text),
                   'StartSel=' || chr(57344) || ', StopSel=' || chr(57345) ||
                   ', MaxWords=30, MinWords=12, MaxFragments=2')::text AS snippet
  FROM (
      SELECT DISTINCT ON (m.id)
             m.id AS message_id, m.conversation_id, c.title AS conversation_title, m.role, m.created_at,
             b.content,
             ts_rank(to_tsvector('english', b.content), websearch_to_tsquery('english', @query::text)) AS rank
        FROM convo.blocks b
        JOIN convo.messages m ON m.id = b.message_id
        JOIN convo.conversations c ON c.id = m.conversation_id
       WHERE c.owner_id = @owner_id::text
         AND b.block_type = 'text'
         AND to_tsvector('english', b.content) @@ websearch_to_tsquery('english', @query::text)
       ORDER BY m.id, rank DESC
  ) hit
 ORDER BY hit.rank DESC, hit.created_at DESC, hit.message_id
 LIMIT @max_rows::int;
