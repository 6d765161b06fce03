package view

import (
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// Change is one typed change an event makes to a conversation's state
// (Conversation.Read). Its concrete type is one of those below.
type Change interface {
	// Prompt is the prompt the change belongs to: "" for a change of the
	// conversation (messages, the active path).
	Prompt() string
	// Time is when the change committed: zero when its event has no time.
	Time() time.Time
	// Seq is its event's seq (0 for a change Replay made).
	Seq() int64
	isChange()
}

// Base is what every Change has.
type Base struct {
	PromptID string
	At       time.Time
	EventSeq int64
}

func (b Base) Prompt() string  { return b.PromptID }
func (b Base) Time() time.Time { return b.At }
func (b Base) Seq() int64      { return b.EventSeq }
func (Base) isChange()         {}

// MessageAdded: a message joined the conversation (message_created).
type MessageAdded struct {
	Base
	Message *convov1.Message
}

// MessageChanged: a message's status (or prompt) changed
// (message_updated, and the events of pauses, which carry the reply's
// message).
type MessageChanged struct {
	Base
	Message *convov1.Message
}

// HistoryCleared: every message was removed.
type HistoryCleared struct{ Base }

// PathSwitched: the active path changed (branch_switched): the messages
// after the fork are replaced by Switch's.
type PathSwitched struct {
	Base
	Switch *convov1.BranchSwitched
}

// PromptQueued: a prompt was queued to fill the assistant message
// MessageID.
type PromptQueued struct {
	Base
	MessageID string
}

// PromptStarted: a worker took the prompt.
type PromptStarted struct{ Base }

// PromptWaiting: the prompt waits for answers to its input requests,
// held by no worker.
type PromptWaiting struct{ Base }

// Outcome is how a prompt ended.
type Outcome int

const (
	Completed Outcome = iota
	Failed
	Cancelled
)

// PromptEnded: the prompt ended; Error is a failed prompt's error as its
// event has it ("" when it has none).
type PromptEnded struct {
	Base
	Outcome Outcome
	Error   string
}

// BlockStarted: a block opened in message MessageID.
type BlockStarted struct {
	Base
	BlockID, MessageID, Type string
	Kind                     Kind
	Position                 int32
	// Metadata is the metadata the block opened with (a tool_use block's
	// "name" among it).
	Metadata *structpb.Struct
}

// BlockAppended: text was appended to a block.
type BlockAppended struct {
	Base
	BlockID string
	Delta   string
}

// BlockEnded: a block was closed, with its final metadata (nil: the
// metadata it had).
type BlockEnded struct {
	Base
	BlockID  string
	Metadata *structpb.Struct
}

// CallStarted: the tool call of a tool_use block started, with its input
// (the event's, else the call's own).
type CallStarted struct {
	Base
	BlockID string
	Call    *convov1.ToolCall
	Input   *structpb.Value
}

// CallProgressed: a tool call wrote output.
type CallProgressed struct {
	Base
	BlockID string
	Output  string
}

// CallEnded: a tool call completed or failed; Call holds its output and
// status, Error a failed call's error (the event's, else the call's).
type CallEnded struct {
	Base
	BlockID string
	Call    *convov1.ToolCall
	Failed  bool
	Error   string
}

// InputRequested: a tool call asks a person for input.
type InputRequested struct {
	Base
	Request *convov1.InputRequest
}

// InputAnswered: an input request was answered, expired or cancelled.
type InputAnswered struct {
	Base
	Answer *convov1.InputAnswered
}
