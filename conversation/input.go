package conversation

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// InputRequest is what a tool call waits for from a person: an approval,
// a client tool's run, or the answer to a question (docs/worker-api.md,
// "Pauses"). Request and Answer are JSON objects of the kind's shape. In
// a bounded snapshot (Store.RecentState) an answered request's Answer is
// nil once the snapshot's budget is spent: its Status still says it was
// answered.
type InputRequest struct {
	ToolCallID     uuid.UUID       `json:"toolCallId"`
	PromptID       uuid.UUID       `json:"promptId"`
	ConversationID uuid.UUID       `json:"conversationId"`
	Kind           InputKind       `json:"kind"`
	Request        json.RawMessage `json:"request,omitempty"`
	Status         InputStatus     `json:"status"`
	Answer         json.RawMessage `json:"answer,omitempty"`
	AnsweredAt     *time.Time      `json:"answeredAt,omitempty"`
	ExpiresAt      *time.Time      `json:"expiresAt,omitempty"`
	// ClaimedBy and ClaimExpiresAt name the client that claimed a client
	// tool's run, and until when (empty and nil when unclaimed).
	ClaimedBy      string     `json:"claimedBy,omitempty"`
	ClaimExpiresAt *time.Time `json:"claimExpiresAt,omitempty"`
	CreatedAt      time.Time  `json:"createdAt"`
}

// InputKind is what an input request asks for.
type InputKind string

// The kinds of input requests.
const (
	InputApproval   InputKind = "approval"
	InputClientTool InputKind = "client_tool"
	InputQuestion   InputKind = "question"
)

// InputStatus is where an input request stands.
type InputStatus string

// The statuses of input requests.
const (
	InputPending   InputStatus = "pending"
	InputAnswered  InputStatus = "answered"
	InputExpired   InputStatus = "expired"
	InputCancelled InputStatus = "cancelled"
)

// AnswerInputParams answers one input request.
type AnswerInputParams struct {
	OwnerID    string
	ToolCallID uuid.UUID
	// Answer is the answer as a JSON object of the request's kind:
	// {"approved": bool, "reason": text}, {"output": text} or
	// {"error": text}, {"answer": text}.
	Answer json.RawMessage
	// Field, when set, names the answer in the caller's request (e.g.
	// "resume[1].payload") for AnswerInputs to name a refused one.
	Field string
}

// ClaimInputParams claims a client tool's run for a claimant.
type ClaimInputParams struct {
	OwnerID    string
	ToolCallID uuid.UUID
	Claimant   string
	Lease      time.Duration
}
