package conversation

import (
	"time"

	"github.com/google/uuid"
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
	// SendPolicy is the conversation's send policy; SendPolicyDefault:
	// the server's (SendPolicyEnqueue).
	SendPolicy SendPolicy
	// Role is the role in it of the user who read it (RoleOwner,
	// RoleParticipant or RoleViewer); empty when the read was not a
	// user's.
	Role MemberRole
}

// SendPolicy is what a send does while a reply of its conversation is
// queued or running (docs/api.md, "Sending while a reply runs").
type SendPolicy string

const (
	// SendPolicyDefault is the conversation's policy, else the server's
	// (SendPolicyEnqueue).
	SendPolicyDefault SendPolicy = ""
	// SendPolicyEnqueue writes the message now, marked queued; its reply
	// starts when every reply before it ended.
	SendPolicyEnqueue SendPolicy = "enqueue"
	// SendPolicyInterrupt cancels the replies in flight (and queued),
	// then answers the message at once.
	SendPolicyInterrupt SendPolicy = "interrupt"
	// SendPolicyReject refuses the send (FailedPrecondition).
	SendPolicyReject SendPolicy = "reject"
)

// PageCursor is a position in a list ordered by (time, id) descending: the
// next page starts strictly after it.
type PageCursor struct {
	Time time.Time
	ID   uuid.UUID
}

// State is a conversation as it stood at event Seq: every message with every
// block, finished or still streaming (with its content up to Seq).
type State struct {
	Conversation Conversation
	Messages     []Message
	Seq          int64
	// Older reports that messages before the first of Messages were left
	// out (Store.RecentState); Store.OlderMessages reads them.
	Older bool
	// PendingInputs are the input requests of the conversation's
	// unfinished prompts whose tool calls are still open at Seq (pending,
	// or answered and not yet acted on by a worker), in the order the calls
	// started.
	PendingInputs []InputRequest
}

// Page is a page of a conversation's older messages (Store.OlderMessages).
type Page struct {
	// Messages are in order, each with every block as it stands.
	Messages []Message
	// Older reports that messages before the first of Messages remain.
	Older bool
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
