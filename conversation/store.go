package conversation

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"
)

// SendMessageParams is a user's message and the generation it asks for.
type SendMessageParams struct {
	OwnerID string
	// ConversationID is uuid.Nil to start a new conversation.
	ConversationID uuid.UUID
	Text           string
	// ModelConfigs holds one JSON object per prompt to queue: one for a
	// normal reply, two for an A/B comparison.
	ModelConfigs []json.RawMessage
}

// SendMessageResult names what SendMessage created.
type SendMessageResult struct {
	ConversationID      uuid.UUID
	UserMessageID       uuid.UUID
	AssistantMessageIDs []uuid.UUID
	PromptIDs           []uuid.UUID
}

// Cursor is a position in one conversation's event log.
type Cursor struct {
	ConversationID uuid.UUID
	AfterSeq       int64
}

// Store persists conversations. Every method returns *Error values with
// NotFound for an unknown id or a conversation the owner does not own,
// Invalid for malformed input, FailedPrecondition for an illegal state
// change, and Unavailable when the database cannot be reached.
type Store interface {
	// SendMessage appends a completed user message and queues one prompt
	// (with its pending assistant message) per model configuration, in one
	// transaction.
	SendMessage(ctx context.Context, p SendMessageParams) (SendMessageResult, error)

	// State reads the conversation, every message and every block (with the
	// content of streaming blocks up to State.Seq) in one consistent
	// snapshot, so no event falls between the state and State.Seq.
	State(ctx context.Context, ownerID string, conversationID uuid.UUID) (State, error)

	// EventsAfter returns at most limit events of the conversation with seq >
	// afterSeq, oldest first. It does not check ownership: callers reach it
	// only for conversations whose ownership they have checked.
	EventsAfter(ctx context.Context, conversationID uuid.UUID, afterSeq int64, limit int) ([]Event, error)

	// EventsAfterMany does EventsAfter for many conversations in one round
	// trip, returning at most limit events per conversation, grouped by
	// conversation and ordered by seq.
	EventsAfterMany(ctx context.Context, cursors []Cursor, limit int) ([]Event, error)

	// CancelPrompt cancels a queued or running prompt of the owner. It
	// returns false when the prompt was already cancelled and
	// FailedPrecondition when it had completed or failed.
	CancelPrompt(ctx context.Context, ownerID string, promptID uuid.UUID) (bool, error)
}
