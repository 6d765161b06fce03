package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// The markers MessageSearch puts around matches in a snippet.
const (
	highlightStart = '\uE000'
	highlightEnd   = '\uE001'
)

// DefaultSearchTimeout is how long one search may run unless
// SetSearchTimeout says otherwise.
const DefaultSearchTimeout = 3 * time.Second

// queryCanceled is the SQLSTATE of a statement that a statement_timeout
// (or a cancel request) stopped.
const queryCanceled = "57014"

// SetSearchTimeout bounds how long one search may run in PostgreSQL (its
// statement_timeout); 0 leaves it unbounded. Call it before the store
// serves searches.
func (s *Store) SetSearchTimeout(d time.Duration) { s.searchTimeout = d }

// Search implements conversation.Store. query is websearch_to_tsquery
// syntax; one that has no word to look for (stop words, punctuation)
// finds nothing, and one that only excludes words (-word, a or -b) is
// refused as Invalid, since it would match nearly everything. A search
// that runs longer than the search timeout is stopped and answered
// DeadlineExceeded.
func (s *Store) Search(ctx context.Context, ownerID, query string, limit int) ([]conversation.SearchResult, error) {
	if strings.TrimSpace(query) == "" {
		return nil, nil
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, translate(err, "search messages")
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only: nothing to undo
	q := s.q.WithTx(tx)
	check, err := q.SearchBegin(ctx, dbq.SearchBeginParams{Timeout: fmt.Sprintf("%dms", s.searchTimeout.Milliseconds()), Query: query})
	if err != nil {
		return nil, s.searchError(ctx, err)
	}
	if !check.HasLexemes {
		return nil, nil
	}
	if !check.Indexable {
		return nil, conversation.Errorf(conversation.Invalid,
			"query: has no word to find, only words to exclude (-word, or an or with one), which would match nearly every message; add a word to find")
	}
	rows, err := q.MessageSearch(ctx, dbq.MessageSearchParams{OwnerID: ownerID, Query: query, MaxRows: int32(limit)})
	if err != nil {
		return nil, s.searchError(ctx, err)
	}
	out := make([]conversation.SearchResult, len(rows))
	for i, r := range rows {
		snippet, highlights := parseHighlights(r.Snippet)
		out[i] = conversation.SearchResult{
			ConversationID: r.ConversationID, ConversationTitle: r.ConversationTitle,
			MessageID: r.MessageID, BlockID: r.BlockID, Role: conversation.Role(r.Role),
			Snippet: snippet, Highlights: highlights, Rank: r.Rank, CreatedAt: r.CreatedAt,
		}
	}
	return out, nil
}

// searchError translates a search's error: a statement the search timeout
// stopped (the caller's context still alive) is DeadlineExceeded, saying
// so.
func (s *Store) searchError(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == queryCanceled && ctx.Err() == nil {
		return conversation.Errorf(conversation.DeadlineExceeded,
			"query: the search ran longer than %v, this server's limit for one search; search for rarer words or a phrase", s.searchTimeout)
	}
	return translate(err, "search messages")
}

// parseHighlights removes the match markers from a snippet and returns the
// ranges they enclosed, in code points of the cleaned snippet.
func parseHighlights(marked string) (string, []conversation.Range) {
	var b strings.Builder
	var ranges []conversation.Range
	n, start := 0, -1
	for _, r := range marked {
		switch r {
		case highlightStart:
			start = n
		case highlightEnd:
			if start >= 0 && n > start {
				ranges = append(ranges, conversation.Range{Start: start, End: n})
			}
			start = -1
		default:
			b.WriteRune(r)
			n++
		}
	}
	return b.String(), ranges
}
