package view

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// Conversation is a conversation as a client that took the stream holds
// it: its messages on the active path, in order, each with its blocks by
// position, their content so far and their tool calls.
type Conversation struct {
	// Messages are in conversation order. Read them; change them only
	// through Apply.
	Messages []*Message
	blocks   map[string]*Block
	reader   *Reader
}

// Message is one message of a Conversation.
type Message struct {
	ID, Role, Status, PromptID string
	// Error is a failed reply's error, as its message carries it.
	Error string
	// Blocks are in position order (blocks of one message may start in
	// any order).
	Blocks []*Block
}

// Block is one block of a Message.
type Block struct {
	ID, MessageID, Type string
	Kind                Kind
	Position            int32
	Metadata            *structpb.Struct
	// Completed: the block has ended (a snapshot's blocks have, but for
	// those of a reply being written).
	Completed bool
	// Call is a tool_use block's tool call, once started; Input its
	// input.
	Call  *convov1.ToolCall
	Input *structpb.Value
	// File is a file block's file, its url signed (wire.SignFiles).
	File    *convov1.File
	content strings.Builder
	output  strings.Builder
}

// Content is the block's text so far.
func (b *Block) Content() string { return b.content.String() }

// Output is the block's tool call's output so far.
func (b *Block) Output() string { return b.output.String() }

// New returns the conversation a snapshot holds.
func New(snap *convov1.Snapshot) *Conversation {
	c := &Conversation{blocks: map[string]*Block{}, reader: NewReader()}
	for _, m := range snap.GetMessages() {
		c.reader.Learn(m)
		c.addMessage(m)
	}
	return c
}

// Message returns message id, or nil.
func (c *Conversation) Message(id string) *Message {
	for _, m := range c.Messages {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// Block returns block id, or nil.
func (c *Conversation) Block(id string) *Block { return c.blocks[id] }

// MessageOf returns the id of the assistant message promptID fills ("" when
// the conversation does not hold it).
func (c *Conversation) MessageOf(promptID string) string {
	for _, m := range c.Messages {
		if m.PromptID == promptID {
			return m.ID
		}
	}
	return ""
}

// Unfinished returns the assistant messages whose prompts are still
// queued or running (pending or processing), in message order.
func (c *Conversation) Unfinished() []*Message {
	var out []*Message
	for _, m := range c.Messages {
		if m.Role == "assistant" && m.PromptID != "" && (m.Status == "pending" || m.Status == "processing") {
			out = append(out, m)
		}
	}
	return out
}

func (c *Conversation) addMessage(m *convov1.Message) {
	if c.Message(m.GetId()) != nil {
		return
	}
	vm := &Message{ID: m.GetId(), Role: m.GetRole(), Status: m.GetStatus(), PromptID: m.GetPromptId(), Error: m.GetError()}
	c.Messages = append(c.Messages, vm)
	for _, b := range m.GetBlocks() {
		vb := &Block{ID: b.GetId(), MessageID: vm.ID, Type: b.GetBlockType(), Kind: KindOf(b.GetBlockType()),
			Position: b.GetPosition(), Metadata: b.GetMetadata(), Completed: b.GetStatus() != "streaming", File: b.GetFile()}
		vb.content.WriteString(b.GetContent())
		if tc := b.GetToolCall(); tc != nil {
			vb.Call, vb.Input = tc, tc.GetInput()
			vb.output.WriteString(tc.GetOutput())
		}
		c.insertBlock(vm, vb)
	}
}

// insertBlock places b in m by position.
func (c *Conversation) insertBlock(m *Message, b *Block) {
	i, _ := slices.BinarySearchFunc(m.Blocks, b.Position, func(x *Block, p int32) int { return int(x.Position - p) })
	m.Blocks = slices.Insert(m.Blocks, i, b)
	c.blocks[b.ID] = b
}

// Read returns the changes ev makes, in order, without applying them: a
// protocol may look at the conversation as it stood before each (AG-UI
// snapshots it before a run's first change), then Apply it. See
// Reader.Read.
func (c *Conversation) Read(ev *convov1.Event) []Change { return c.reader.Read(ev) }

// Apply folds changes Read returned into the conversation.
func (c *Conversation) Apply(changes ...Change) {
	for _, ch := range changes {
		c.apply(ch)
	}
}

func (c *Conversation) apply(ch Change) {
	switch ch := ch.(type) {
	case MessageAdded:
		c.addMessage(ch.Message)
	case MessageChanged:
		if m := c.Message(ch.Message.GetId()); m != nil {
			m.Status, m.Error = ch.Message.GetStatus(), ch.Message.GetError()
			if p := ch.Message.GetPromptId(); p != "" {
				m.PromptID = p
			}
		}
	case HistoryCleared:
		c.Messages, c.blocks = nil, map[string]*Block{}
	case PathSwitched:
		c.switchPath(ch.Switch)
	case BlockStarted:
		m := c.Message(ch.MessageID)
		if m == nil || c.blocks[ch.BlockID] != nil {
			return
		}
		c.insertBlock(m, &Block{ID: ch.BlockID, MessageID: ch.MessageID, Type: ch.Type, Kind: ch.Kind,
			Position: ch.Position, Metadata: ch.Metadata})
	case BlockAppended:
		if b := c.blocks[ch.BlockID]; b != nil {
			b.content.WriteString(ch.Delta)
		}
	case BlockEnded:
		if b := c.blocks[ch.BlockID]; b != nil {
			b.Completed = true
			if ch.Metadata != nil {
				b.Metadata = ch.Metadata
			}
		}
	case CallStarted:
		if b := c.blocks[ch.BlockID]; b != nil {
			b.Call, b.Input = ch.Call, ch.Input
		}
	case CallProgressed:
		if b := c.blocks[ch.BlockID]; b != nil {
			b.output.WriteString(ch.Output)
		}
	case CallEnded:
		if b := c.blocks[ch.BlockID]; b != nil {
			b.Call = ch.Call
			if b.Input == nil {
				b.Input = ch.Call.GetInput()
			}
			b.output.Reset()
			b.output.WriteString(ch.Call.GetOutput())
		}
	}
}

// switchPath folds a change of the active path as docs/events.md says:
// the messages up to the fork stay, the rest go, the new path's messages
// after the fork come (all of them when the conversation does not hold
// the fork: it is older than the stream's snapshot). A switch that left
// messages out (older_page_token: a path larger than a snapshot) replaces
// every message, as a bounded snapshot would.
func (c *Conversation) switchPath(s *convov1.BranchSwitched) {
	keep := 0
	if fork := s.GetForkMessageId(); fork != "" && s.GetOlderPageToken() == "" {
		for i, m := range c.Messages {
			if m.ID == fork {
				keep = i + 1
				break
			}
		}
	}
	for _, m := range c.Messages[keep:] {
		for _, b := range m.Blocks {
			delete(c.blocks, b.ID)
		}
	}
	c.Messages = slices.Clip(c.Messages[:keep])
	for _, m := range s.GetMessages() {
		c.addMessage(m)
	}
}
