package conversation

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Preference is a vote in an A/B comparison.
type Preference string

const (
	PreferA   Preference = "a"
	PreferB   Preference = "b"
	PreferTie Preference = "tie"
)

// Comparison is an A/B comparison: two prompts answering one user message.
type Comparison struct {
	ID             uuid.UUID
	ConversationID uuid.UUID
	UserMessageID  uuid.UUID
	A, B           ComparisonSide
	// Preference is "" until the owner votes.
	Preference Preference
	VotedAt    *time.Time
	CreatedAt  time.Time
}

// ComparisonSide is one reply of a comparison.
type ComparisonSide struct {
	PromptID    uuid.UUID
	MessageID   uuid.UUID
	ModelConfig json.RawMessage
	Status      PromptStatus
}
