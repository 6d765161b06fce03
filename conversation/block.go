package conversation

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// BlockStatus tells whether a block may still grow.
type BlockStatus string

const (
	BlockStreaming BlockStatus = "streaming"
	BlockCompleted BlockStatus = "completed"
)

// ToolCallStatus is where a tool invocation is in its life.
type ToolCallStatus string

const (
	ToolCallStarted   ToolCallStatus = "started"
	ToolCallRunning   ToolCallStatus = "running"
	ToolCallCompleted ToolCallStatus = "completed"
	ToolCallFailed    ToolCallStatus = "failed"
)

// Block is an ordered piece of a message. Type is text, reasoning,
// structured, tool_use, tool_result or any lower_snake name a worker picks.
type Block struct {
	ID        uuid.UUID
	MessageID uuid.UUID
	PromptID  uuid.NullUUID
	Type      string
	Status    BlockStatus
	// Position orders the blocks of a message: 0, 1, 2 …
	Position int
	// Content is the concatenation of the block's deltas so far.
	Content string
	// Metadata is a JSON object.
	Metadata json.RawMessage
	// ToolCall is the call a tool_use block carries, if any.
	ToolCall  *ToolCall
	CreatedAt time.Time
	EndedAt   *time.Time
}

// ToolCall is a tool invocation tied to a tool_use block.
type ToolCall struct {
	ID      uuid.UUID
	BlockID uuid.UUID
	Name    string
	// Input is the call's arguments as JSON.
	Input  json.RawMessage
	Status ToolCallStatus
	// Output is the concatenation of the call's output so far.
	Output    string
	Error     string
	StartedAt time.Time
	EndedAt   *time.Time
}
