package conversation

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// PromptStatus is where a generation run is in its life.
type PromptStatus string

const (
	PromptQueued    PromptStatus = "queued"
	PromptRunning   PromptStatus = "running"
	PromptCompleted PromptStatus = "completed"
	PromptFailed    PromptStatus = "failed"
	PromptCancelled PromptStatus = "cancelled"
)

// Prompt is one generation run that fills one assistant message.
type Prompt struct {
	ID             uuid.UUID
	ConversationID uuid.UUID
	MessageID      uuid.UUID
	Status         PromptStatus
	// ModelConfig is the JSON object the prompt was asked with.
	ModelConfig json.RawMessage
	Error       string
	CreatedAt   time.Time
	StartedAt   *time.Time
	EndedAt     *time.Time
}

// Trace is what one prompt did: the prompt and its events in order.
type Trace struct {
	Prompt Prompt
	Events []Event
}

// PromptInput is the user message a prompt's reply answers.
type PromptInput struct {
	MessageID uuid.UUID
	// Text is the message's text blocks, in order.
	Text string
	// Files are the files the message holds, in order.
	Files     []MessageFile
	CreatedAt time.Time
}

// MessageFile is a file a user message holds: what its "file" block's
// metadata names of it.
type MessageFile struct {
	ID        uuid.UUID `json:"fileId"`
	Filename  string    `json:"filename"`
	MediaType string    `json:"mediaType"`
}
