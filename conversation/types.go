package conversation

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Role is who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
)

// MessageStatus is where a message is in its life.
type MessageStatus string

const (
	MessagePending    MessageStatus = "pending"
	MessageProcessing MessageStatus = "processing"
	MessageCompleted  MessageStatus = "completed"
	MessageFailed     MessageStatus = "failed"
	MessageCancelled  MessageStatus = "cancelled"
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

// Conversation is a thread owned by one user.
type Conversation struct {
	ID             uuid.UUID
	OwnerID        string
	Title          string
	ActivePromptID uuid.NullUUID
	CreatedAt      time.Time
	UpdatedAt      time.Time
	LastMessageAt  time.Time
	// LastSeq is the seq of the conversation's newest event.
	LastSeq int64
}

// Message is one turn of a conversation, with its blocks in order.
type Message struct {
	ID             uuid.UUID
	ConversationID uuid.UUID
	Role           Role
	Status         MessageStatus
	// PromptID is the prompt that fills an assistant message.
	PromptID  uuid.NullUUID
	CreatedAt time.Time
	UpdatedAt time.Time
	Blocks    []Block
	// Feedback is the owner's rating of an assistant message, if any.
	Feedback *Feedback
	// ComparisonID and ComparisonSlot ("a" or "b") are set on the two
	// replies of an A/B comparison.
	ComparisonID   uuid.NullUUID
	ComparisonSlot string
}

// Rating is a thumbs up or down.
type Rating string

const (
	RatingUp   Rating = "up"
	RatingDown Rating = "down"
)

// Feedback is the owner's rating of an assistant message.
type Feedback struct {
	Rating    Rating
	Comment   string
	CreatedAt time.Time
}

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

// PageCursor is a position in a list ordered by (time, id) descending: the
// next page starts strictly after it.
type PageCursor struct {
	Time time.Time
	ID   uuid.UUID
}

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

// State is a conversation as it stood at event Seq: every message with every
// block, finished or still streaming (with its content up to Seq).
type State struct {
	Conversation Conversation
	Messages     []Message
	Seq          int64
}

// Streaming returns the blocks of s still streaming at s.Seq, in order.
func (s State) Streaming() []Block {
	var out []Block
	for _, m := range s.Messages {
		for _, b := range m.Blocks {
			if b.Status == BlockStreaming {
				out = append(out, b)
			}
		}
	}
	return out
}

// Completed returns a copy of s without the blocks still streaming: the
// snapshot a new subscriber starts from.
func (s State) Completed() State {
	out := s
	out.Messages = make([]Message, len(s.Messages))
	for i, m := range s.Messages {
		blocks := make([]Block, 0, len(m.Blocks))
		for _, b := range m.Blocks {
			if b.Status == BlockCompleted {
				blocks = append(blocks, b)
			}
		}
		m.Blocks = blocks
		out.Messages[i] = m
	}
	return out
}
