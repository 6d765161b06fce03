package conversation

import (
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

// Message is one turn of a conversation, with its blocks in order.
type Message struct {
	ID             uuid.UUID
	ConversationID uuid.UUID
	Role           Role
	// SenderID is who sent a user message: the conversation's owner or a
	// participant. Empty for an assistant's message, and for a user
	// message written before conversations had members (the owner's).
	SenderID string
	Status   MessageStatus
	// Position orders the conversation's messages (it only grows).
	Position int64
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
	// ParentID is the message this one follows in the conversation's
	// tree (a reply's user message); none for a first message. Messages
	// of one parent are versions of one turn (docs/branches.md).
	ParentID uuid.NullUUID
	// SiblingCount is how many versions the message's turn has (1 when
	// it was never edited or regenerated; the two replies of an A/B
	// comparison count once), SiblingIndex which one it is, from 0.
	SiblingCount int
	SiblingIndex int
	// Error is why a failed message failed: its prompt's error as
	// stored. Empty unless Status is MessageFailed.
	Error string
	// Queued marks a user message sent while a reply was in flight
	// (SendPolicyEnqueue), and its pending replies, until their turn.
	Queued bool
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
