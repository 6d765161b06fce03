package conversation

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// EventKind names what an event records. The names are the field names of
// the Connect API's Event oneof.
type EventKind string

const (
	EventMessageCreated      EventKind = "messageCreated"
	EventMessageUpdated      EventKind = "messageUpdated"
	EventPromptQueued        EventKind = "promptQueued"
	EventPromptStarted       EventKind = "promptStarted"
	EventPromptCompleted     EventKind = "promptCompleted"
	EventPromptFailed        EventKind = "promptFailed"
	EventPromptCancelled     EventKind = "promptCancelled"
	EventBlockStart          EventKind = "blockStart"
	EventBlockDelta          EventKind = "blockDelta"
	EventBlockEnd            EventKind = "blockEnd"
	EventToolCallStarted     EventKind = "toolCallStarted"
	EventToolCallProgress    EventKind = "toolCallProgress"
	EventToolCallCompleted   EventKind = "toolCallCompleted"
	EventToolCallFailed      EventKind = "toolCallFailed"
	EventConversationUpdated EventKind = "conversationUpdated"
	EventHistoryCleared      EventKind = "historyCleared"
	// The kinds of pauses (docs/worker-api.md, "Pauses"): a client
	// that did not ask for them must never receive them (docs/events.md).
	EventInputRequested EventKind = "inputRequested"
	EventInputAnswered  EventKind = "inputAnswered"
	EventInputClaimed   EventKind = "inputClaimed"
	EventPromptWaiting  EventKind = "promptWaiting"
	// EventBranchSwitched changes the active path (docs/branches.md): a
	// client that did not ask for it never receives it; its stream ends
	// before it and resumes from a snapshot (docs/events.md).
	EventBranchSwitched EventKind = "branchSwitched"
	// The kinds of members (docs/api.md, "Members"): a member added (or
	// their role changed), a member removed. The hub ends the removed
	// user's subscriptions before a memberRemoved.
	EventMemberAdded   EventKind = "memberAdded"
	EventMemberRemoved EventKind = "memberRemoved"
	// The kinds of share links (docs/api.md, "Share links"): a share
	// made, a share revoked. The hub ends the revoked share's streams on
	// a shareRevoked.
	EventShareCreated EventKind = "shareCreated"
	EventShareRevoked EventKind = "shareRevoked"
)

// Event is one committed change of a conversation. Seq numbers a
// conversation's events 1, 2, 3 … with no gaps, in commit order.
type Event struct {
	ConversationID uuid.UUID
	Seq            int64
	Kind           EventKind
	PromptID       uuid.NullUUID
	BlockID        uuid.NullUUID
	ToolCallID     uuid.NullUUID
	// Payload is the event's body in the proto3 JSON form of the Connect
	// API's message for Kind (docs/events.md).
	Payload   json.RawMessage
	CreatedAt time.Time
	// Replay marks an event synthesised from a snapshot for a block that was
	// still streaming, rather than read from the log.
	Replay bool
}
