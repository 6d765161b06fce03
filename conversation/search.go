package conversation

import (
	"time"

	"github.com/google/uuid"
)

// SearchResult is one message matching a full-text query.
type SearchResult struct {
	ConversationID    uuid.UUID
	ConversationTitle string
	MessageID         uuid.UUID
	Role              Role
	// Snippet is an excerpt of the message's text around the matches;
	// Highlights are the matched ranges in it, in Unicode code points.
	Snippet    string
	Highlights []Range
	Rank       float64
	CreatedAt  time.Time
}

// Range is a half-open range [Start, End).
type Range struct{ Start, End int }
