package agui

import (
	"encoding/json"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

// thread is the AG-UI adapter's view of a conversation: the snapshot with
// every event applied, from which MESSAGES_SNAPSHOT is built.
type thread struct {
	messages []*threadMessage
	blocks   map[string]*threadBlock
}

type threadMessage struct {
	id, role, status, promptID string
	blocks                     []*threadBlock // by position
}

type threadBlock struct {
	id, messageID, typ string
	position           int32
	content            strings.Builder
	metadata           *structpb.Struct
	completed          bool
	// queued marks a block whose events wait in a deferred run's queue:
	// they will reach the client then, so no snapshot may hold it before.
	queued bool
	call   *convov1.ToolCall // the tool call of a tool_use block
	input  *structpb.Value
	output strings.Builder
}

func newThread(snap *convov1.Snapshot) *thread {
	t := &thread{blocks: map[string]*threadBlock{}}
	for _, m := range snap.GetMessages() {
		t.addMessage(m)
	}
	return t
}

func (t *thread) message(id string) *threadMessage {
	for _, m := range t.messages {
		if m.id == id {
			return m
		}
	}
	return nil
}

func (t *thread) addMessage(m *convov1.Message) {
	if t.message(m.Id) != nil {
		return
	}
	tm := &threadMessage{id: m.Id, role: m.Role, status: m.Status, promptID: m.PromptId}
	t.messages = append(t.messages, tm)
	for _, b := range m.Blocks {
		tb := &threadBlock{id: b.Id, messageID: m.Id, typ: b.BlockType, position: b.Position,
			metadata: b.Metadata, completed: b.Status != "streaming"}
		tb.content.WriteString(b.Content)
		if tc := b.ToolCall; tc != nil {
			tb.call, tb.input = tc, tc.Input
			tb.output.WriteString(tc.Output)
		}
		t.insertBlock(tm, tb)
	}
}

// insertBlock places b in m by position (blocks of one message may start
// in any order).
func (t *thread) insertBlock(m *threadMessage, b *threadBlock) {
	i, _ := slices.BinarySearchFunc(m.blocks, b.position, func(x *threadBlock, p int32) int { return int(x.position - p) })
	m.blocks = slices.Insert(m.blocks, i, b)
	t.blocks[b.id] = b
}

// apply folds one event in, and returns the block it created, if any.
func (t *thread) apply(ev *convov1.Event) *threadBlock {
	switch k := ev.Kind.(type) {
	case *convov1.Event_MessageCreated:
		t.addMessage(k.MessageCreated.GetMessage())
	case *convov1.Event_MessageUpdated:
		if u := k.MessageUpdated.GetMessage(); u != nil {
			if m := t.message(u.Id); m != nil {
				m.status = u.Status
				if u.PromptId != "" {
					m.promptID = u.PromptId
				}
			}
		}
	case *convov1.Event_HistoryCleared:
		t.messages, t.blocks = nil, map[string]*threadBlock{}
	case *convov1.Event_BranchSwitched:
		t.switchBranch(k.BranchSwitched)
	case *convov1.Event_BlockStart:
		s := k.BlockStart
		m := t.message(s.MessageId)
		if m == nil || t.blocks[s.BlockId] != nil {
			return nil
		}
		b := &threadBlock{id: s.BlockId, messageID: s.MessageId, typ: s.BlockType, position: s.Position, metadata: s.Metadata}
		t.insertBlock(m, b)
		return b
	case *convov1.Event_BlockDelta:
		if b := t.blocks[k.BlockDelta.BlockId]; b != nil {
			b.content.WriteString(k.BlockDelta.Content)
		}
	case *convov1.Event_BlockEnd:
		if b := t.blocks[k.BlockEnd.BlockId]; b != nil {
			b.completed = true
			if k.BlockEnd.Metadata != nil {
				b.metadata = k.BlockEnd.Metadata
			}
		}
	case *convov1.Event_ToolCallStarted:
		tc := k.ToolCallStarted.GetToolCall()
		if b := t.blocks[tc.GetBlockId()]; b != nil {
			b.call, b.input = tc, k.ToolCallStarted.Input
			if b.input == nil {
				b.input = tc.Input
			}
		}
	case *convov1.Event_ToolCallProgress:
		if b := t.blocks[k.ToolCallProgress.BlockId]; b != nil {
			b.output.WriteString(k.ToolCallProgress.Output)
		}
	case *convov1.Event_ToolCallCompleted:
		t.endCall(k.ToolCallCompleted.GetToolCall())
	case *convov1.Event_ToolCallFailed:
		t.endCall(k.ToolCallFailed.GetToolCall())
	}
	return nil
}

// switchBranch folds a change of the active path as docs/events.md
// says: the messages up to the fork stay, the rest go, the new path's
// messages after the fork come (all of them when the thread does not
// hold the fork: it is older than the stream's snapshot). A switch that
// left messages out (older_page_token: a path larger than a snapshot)
// replaces every message, as a bounded snapshot would.
func (t *thread) switchBranch(s *convov1.BranchSwitched) {
	keep := 0
	if fork := s.GetForkMessageId(); fork != "" && s.GetOlderPageToken() == "" {
		for i, m := range t.messages {
			if m.id == fork {
				keep = i + 1
				break
			}
		}
	}
	for _, m := range t.messages[keep:] {
		for _, b := range m.blocks {
			delete(t.blocks, b.id)
		}
	}
	t.messages = slices.Clip(t.messages[:keep])
	for _, m := range s.GetMessages() {
		t.addMessage(m)
	}
}

func (t *thread) endCall(tc *convov1.ToolCall) {
	if b := t.blocks[tc.GetBlockId()]; b != nil {
		b.call = tc
		if b.input == nil {
			b.input = tc.Input
		}
		b.output.Reset()
		b.output.WriteString(tc.Output)
	}
}

// activePrompt is a prompt still queued or running.
type activePrompt struct{ promptID, messageID string }

// active returns the prompts whose assistant messages are pending or
// processing, in message order.
func (t *thread) active() []activePrompt {
	var out []activePrompt
	for _, m := range t.messages {
		if m.role == "assistant" && m.promptID != "" && (m.status == "pending" || m.status == "processing") {
			out = append(out, activePrompt{promptID: m.promptID, messageID: m.id})
		}
	}
	return out
}

// messageOf returns the id of the assistant message promptID fills.
func (t *thread) messageOf(promptID string) string {
	for _, m := range t.messages {
		if m.promptID == promptID {
			return m.id
		}
	}
	return ""
}

// snapshot is the thread as AG-UI messages, built the way a client's
// reducer builds them from the live events (see translator): only
// completed blocks, and none whose events are still queued.
func (t *thread) snapshot() []message {
	out := []message{}
	for _, m := range t.messages {
		switch m.role {
		case "user", "system":
			var text strings.Builder
			for _, b := range m.blocks {
				if b.typ == "text" {
					text.WriteString(b.content.String())
				}
			}
			out = append(out, message{ID: m.id, Role: m.role, Content: ptr(text.String())})
		case "assistant":
			out = t.assistant(out, m)
		}
	}
	return out
}

// assistant appends an assistant message's AG-UI messages: one per text or
// structured block (its id the block's), one reasoning message per
// reasoning block, and the message's tool calls in one assistant message
// with the convo message's id, each answered tool call followed by its
// tool message.
func (t *thread) assistant(out []message, m *threadMessage) []message {
	carrier := -1
	for _, b := range m.blocks {
		if !b.completed || b.queued {
			continue
		}
		switch kindOf(b.typ) {
		case blockText:
			out = append(out, message{ID: b.id, Role: "assistant", Content: ptr(b.content.String()),
				Metadata: blockMeta(m.id, b.typ)})
		case blockReasoning:
			out = append(out, message{ID: b.id, Role: "reasoning", Content: ptr(b.content.String()),
				Metadata: blockMeta(m.id, b.typ)})
		case blockToolUse:
			if carrier < 0 {
				carrier = len(out)
				out = append(out, message{ID: m.id, Role: "assistant"})
			}
			callID, name := b.id, wire.MetadataString(b.metadata, "name")
			if b.call != nil {
				callID, name = b.call.Id, b.call.Name
			}
			out[carrier].ToolCalls = append(out[carrier].ToolCalls, toolCall{ID: callID, Type: "function",
				Function: functionCall{Name: wire.ToolName(name), Arguments: toolArguments(b.content.String(), b.input)}})
			if b.call == nil || (b.call.Status != "completed" && b.call.Status != "failed") {
				continue
			}
			// After the carrier and the tool messages already there, as a
			// client's reducer places TOOL_CALL_RESULT.
			at := carrier + 1
			for at < len(out) && out[at].Role == "tool" {
				at++
			}
			content, errText := toolResult(b.output.String(), b.call)
			out = slices.Insert(out, at, message{ID: b.call.Id, Role: "tool", ToolCallID: b.call.Id,
				Content: ptr(content), Error: errText})
		}
	}
	return out
}

// blockKind is how a block type maps onto AG-UI.
type blockKind int

const (
	blockOther     blockKind = iota // a CUSTOM event at its end
	blockText                       // TEXT_MESSAGE_*
	blockReasoning                  // REASONING_*
	blockToolUse                    // TOOL_CALL_*
	blockSkipped                    // nothing: tool_result (TOOL_CALL_RESULT carries the output)
)

func kindOf(blockType string) blockKind {
	switch blockType {
	case "text", "structured":
		return blockText
	case "reasoning":
		return blockReasoning
	case "tool_use":
		return blockToolUse
	case "tool_result":
		return blockSkipped
	}
	return blockOther
}

// blockMeta is the metadata of an AG-UI message made from a block: the
// convo message it belongs to and the block's type.
func blockMeta(messageID, blockType string) metadata {
	return convoMeta(map[string]string{"messageId": messageID, "blockType": blockType})
}

// toolArguments is a tool call's argument text: the tool_use block's
// content (the argument deltas), or, when the worker streamed none, the
// call's input as JSON.
func toolArguments(content string, input *structpb.Value) string {
	if content != "" || input == nil {
		return content
	}
	b, err := json.Marshal(input.AsInterface())
	if err != nil {
		return ""
	}
	return string(b)
}

// toolResult is the content of an ended tool call's AG-UI tool message:
// its output, and for a failed call the error after it.
func toolResult(output string, call *convov1.ToolCall) (content, errText string) {
	if call.Status != "failed" {
		return output, ""
	}
	if output != "" {
		output += "\n"
	}
	return output + "error: " + call.Error, call.Error
}

func ptr[T any](v T) *T { return &v }
