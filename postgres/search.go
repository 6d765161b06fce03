package postgres

import (
	"context"
	"strings"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// The markers MessageSearch puts around matches in a snippet.
const (
	highlightStart = '\uE000'
	highlightEnd   = '\uE001'
)

// Search implements conversation.Store.
func (s *Store) Search(ctx context.Context, ownerID, query string, limit int) ([]conversation.SearchResult, error) {
	rows, err := s.q.MessageSearch(ctx, dbq.MessageSearchParams{OwnerID: ownerID, Query: query, MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err, "search messages")
	}
	out := make([]conversation.SearchResult, len(rows))
	for i, r := range rows {
		snippet, highlights := parseHighlights(r.Snippet)
		out[i] = conversation.SearchResult{
			ConversationID: r.ConversationID, ConversationTitle: r.ConversationTitle,
			MessageID: r.MessageID, Role: conversation.Role(r.Role),
			Snippet: snippet, Highlights: highlights, Rank: r.Rank, CreatedAt: r.CreatedAt,
		}
	}
	return out, nil
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
