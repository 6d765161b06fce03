// Package eventscript builds a conversation's events (convo.v1 Event,
// numbered and timed like the log) for the tests of the protocols'
// translators.
package eventscript

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

// Script builds a conversation's events, numbered and timed like the log:
// each call returns the next event, its seq one more than the last, and
// its time seq milliseconds after a fixed start.
type Script struct {
	seq int64
	t0  time.Time
}

// New starts a script at seq 1.
func New() *Script { return &Script{t0: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

// At is the time of the event numbered seq, in Unix milliseconds.
func (s *Script) At(seq int64) int64 {
	return s.t0.Add(time.Duration(seq) * time.Millisecond).UnixMilli()
}

// After numbers the next event seq+1, as if seq events came before it.
func (s *Script) After(seq int64) { s.seq = seq }

// Event is the next event, of any kind (a convo.v1 message of the
// Event's kind oneof).
func (s *Script) Event(kind proto.Message) *convov1.Event {
	s.seq++
	return wire.NewEvent(s.seq, s.t0.Add(time.Duration(s.seq)*time.Millisecond), kind)
}

// User is a completed user message with one text block (id+"-b").
func (s *Script) User(id, text string) *convov1.Event {
	return s.Event(&convov1.MessageCreated{Message: &convov1.Message{Id: id, Role: "user", Status: "completed",
		Blocks: []*convov1.Block{{Id: id + "-b", BlockType: "text", Content: text, Status: "completed"}}}})
}

// Assistant is a pending assistant message, filled by prompt.
func (s *Script) Assistant(id, prompt string) *convov1.Event {
	return s.Event(&convov1.MessageCreated{Message: &convov1.Message{Id: id, Role: "assistant", Status: "pending", PromptId: prompt}})
}

// Queued is promptQueued of prompt, which fills message msg.
func (s *Script) Queued(prompt, msg string) *convov1.Event {
	return s.Event(&convov1.PromptQueued{Prompt: &convov1.Prompt{Id: prompt, MessageId: msg, Status: "queued"}})
}

// Started is promptStarted.
func (s *Script) Started(prompt, msg string) *convov1.Event {
	return s.Event(&convov1.PromptStarted{Prompt: &convov1.Prompt{Id: prompt, MessageId: msg, Status: "running"}})
}

// Completed is promptCompleted.
func (s *Script) Completed(prompt, msg string) *convov1.Event {
	return s.Event(&convov1.PromptCompleted{Prompt: &convov1.Prompt{Id: prompt, MessageId: msg, Status: "completed"}})
}

// Cancelled is promptCancelled.
func (s *Script) Cancelled(prompt, msg string) *convov1.Event {
	return s.Event(&convov1.PromptCancelled{Prompt: &convov1.Prompt{Id: prompt, MessageId: msg, Status: "cancelled"}})
}

// Failed is promptFailed with errText.
func (s *Script) Failed(prompt, msg, errText string) *convov1.Event {
	return s.Event(&convov1.PromptFailed{Prompt: &convov1.Prompt{Id: prompt, MessageId: msg, Status: "failed", Error: errText}, Error: errText})
}

// Start is blockStart of a block of blockType at position.
func (s *Script) Start(prompt, msg, block, blockType string, position int32, metadata map[string]any) *convov1.Event {
	meta, _ := structpb.NewStruct(metadata)
	return s.Event(&convov1.BlockStart{PromptId: prompt, MessageId: msg, BlockId: block, BlockType: blockType, Position: position, Metadata: meta})
}

// Delta is blockDelta.
func (s *Script) Delta(prompt, msg, block, content string) *convov1.Event {
	return s.Event(&convov1.BlockDelta{PromptId: prompt, MessageId: msg, BlockId: block, Content: content})
}

// End is blockEnd, with the block's final metadata.
func (s *Script) End(prompt, msg, block string, metadata map[string]any) *convov1.Event {
	meta, _ := structpb.NewStruct(metadata)
	return s.Event(&convov1.BlockEnd{PromptId: prompt, MessageId: msg, BlockId: block, Metadata: meta})
}

// ToolStarted is toolCallStarted of call on tool_use block block.
func (s *Script) ToolStarted(call, block, name string, input map[string]any) *convov1.Event {
	var in *structpb.Value
	if input != nil {
		in, _ = structpb.NewValue(input)
	}
	return s.Event(&convov1.ToolCallStarted{ToolCall: &convov1.ToolCall{Id: call, BlockId: block, Name: name, Status: "started", Input: in}, Input: in})
}

// Progress is toolCallProgress.
func (s *Script) Progress(call, block, output string) *convov1.Event {
	return s.Event(&convov1.ToolCallProgress{ToolCallId: call, BlockId: block, Output: output})
}

// ToolDone is toolCallCompleted, or toolCallFailed when errText is set.
func (s *Script) ToolDone(call, block, name, output, errText string) *convov1.Event {
	tc := &convov1.ToolCall{Id: call, BlockId: block, Name: name, Status: "completed", Output: output}
	if errText != "" {
		tc.Status, tc.Error = "failed", errText
		return s.Event(&convov1.ToolCallFailed{ToolCall: tc, Error: errText})
	}
	return s.Event(&convov1.ToolCallCompleted{ToolCall: tc})
}
