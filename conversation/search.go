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
	// BlockID is the message's best-matching block: a text block, or the
	// file block of a file whose text matched.
	BlockID uuid.UUID
	Role    Role
	// Snippet is an excerpt of that block's text (the file's, for a file
	// block) around the matches; Highlights are the matched ranges in it,
	// in Unicode code points.
	Snippet    string
	Highlights []Range
	Rank       float64
	CreatedAt  time.Time
}

// Range is a half-open range [Start, End).
type Range struct{ Start, End int }
