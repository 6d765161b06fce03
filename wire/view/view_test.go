package view

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

func ev(seq int64, kind any) *convov1.Event {
	e := &convov1.Event{Seq: seq}
	switch k := kind.(type) {
	case *convov1.BlockStart:
		e.Kind = &convov1.Event_BlockStart{BlockStart: k}
	case *convov1.BlockDelta:
		e.Kind = &convov1.Event_BlockDelta{BlockDelta: k}
	case *convov1.BlockEnd:
		e.Kind = &convov1.Event_BlockEnd{BlockEnd: k}
	case *convov1.ToolCallStarted:
		e.Kind = &convov1.Event_ToolCallStarted{ToolCallStarted: k}
	case *convov1.ToolCallCompleted:
		e.Kind = &convov1.Event_ToolCallCompleted{ToolCallCompleted: k}
	case *convov1.ToolCallFailed:
		e.Kind = &convov1.Event_ToolCallFailed{ToolCallFailed: k}
	case *convov1.PromptWaiting:
		e.Kind = &convov1.Event_PromptWaiting{PromptWaiting: k}
	case *convov1.MessageCreated:
		e.Kind = &convov1.Event_MessageCreated{MessageCreated: k}
	case *convov1.BranchSwitched:
		e.Kind = &convov1.Event_BranchSwitched{BranchSwitched: k}
	case *convov1.ConversationUpdated:
		e.Kind = &convov1.Event_ConversationUpdated{ConversationUpdated: k}
	default:
		panic("unknown event kind")
	}
	return e
}

// fold reads and applies every event, returning the changes made.
func fold(c *Conversation, events ...*convov1.Event) []Change {
	var all []Change
	for _, e := range events {
		cs := c.Read(e)
		c.Apply(cs...)
		all = append(all, cs...)
	}
	return all
}

func TestKindOfIsTheOneTable(t *testing.T) {
	for typ, want := range map[string]Kind{"text": Text, "reasoning": Reasoning, "structured": Structured,
		"tool_use": ToolUse, "tool_result": ToolResult, "file": File, "citation": Other, "": Other} {
		if got := KindOf(typ); got != want {
			t.Errorf("KindOf(%q) = %v, want %v", typ, got, want)
		}
	}
	if !Text.Streams() || !Reasoning.Streams() || Structured.Streams() || ToolUse.Streams() || Other.Streams() {
		t.Error("only text and reasoning stream")
	}
	if !ToolUse.IsTool() || !ToolResult.IsTool() || Text.IsTool() {
		t.Error("only tool_use and tool_result are a tool's")
	}
}

// A tool call's events name only their block: the change names the
// block's prompt, learnt from its block_start or from the snapshot.
func TestToolCallChangesNameTheirPrompt(t *testing.T) {
	snap := &convov1.Snapshot{Messages: []*convov1.Message{
		{Id: "m1", Role: "assistant", Status: "processing", PromptId: "p1",
			Blocks: []*convov1.Block{{Id: "old", BlockType: "tool_use", Status: "completed"}}},
	}}
	c := New(snap)
	cs := fold(c,
		ev(1, &convov1.BlockStart{PromptId: "p1", MessageId: "m1", BlockId: "new", BlockType: "tool_use", Position: 1}),
		ev(2, &convov1.ToolCallStarted{ToolCall: &convov1.ToolCall{Id: "c1", BlockId: "new", Name: "f", Input: structpb.NewNumberValue(1)}}),
		ev(3, &convov1.ToolCallFailed{ToolCall: &convov1.ToolCall{Id: "c0", BlockId: "old", Status: "failed", Error: "stored"}}),
	)
	if len(cs) != 3 {
		t.Fatalf("changes %v", cs)
	}
	started := cs[1].(CallStarted)
	if started.Prompt() != "p1" || started.Input.GetNumberValue() != 1 {
		t.Errorf("CallStarted %+v: want prompt p1, the call's input (the event has none)", started)
	}
	failed := cs[2].(CallEnded)
	if failed.Prompt() != "p1" || !failed.Failed || failed.Error != "stored" {
		t.Errorf("CallEnded %+v: want prompt p1 (from the snapshot), failed with the call's error", failed)
	}
	if got := c.Block("new").Call.GetId(); got != "c1" {
		t.Errorf("block new's call %q, want c1", got)
	}
}

// The events of pauses carry the reply's message: its status changes
// first, then the pause's own change.
func TestPauseEventsChangeTheMessageFirst(t *testing.T) {
	c := New(&convov1.Snapshot{Messages: []*convov1.Message{{Id: "m1", Role: "assistant", Status: "processing", PromptId: "p1"}}})
	cs := fold(c, ev(1, &convov1.PromptWaiting{Prompt: &convov1.Prompt{Id: "p1"},
		Message: &convov1.Message{Id: "m1", Role: "assistant", Status: "waiting", PromptId: "p1"}}))
	if len(cs) != 2 {
		t.Fatalf("changes %#v, want MessageChanged then PromptWaiting", cs)
	}
	if _, ok := cs[0].(MessageChanged); !ok || cs[0].Prompt() != "" {
		t.Errorf("first change %#v, want MessageChanged of the conversation", cs[0])
	}
	if w, ok := cs[1].(PromptWaiting); !ok || w.Prompt() != "p1" || w.Seq() != 1 {
		t.Errorf("second change %#v, want PromptWaiting of p1 at seq 1", cs[1])
	}
	if got := c.Message("m1").Status; got != "waiting" {
		t.Errorf("message status %q, want waiting", got)
	}
}

// Blocks take their place by position, whatever order they start in;
// text appends; an end completes with its metadata; a tool call's end
// replaces the output its progress wrote.
func TestConversationFoldsBlocks(t *testing.T) {
	c := New(&convov1.Snapshot{})
	meta, _ := structpb.NewStruct(map[string]any{"k": "v"})
	fold(c,
		ev(1, &convov1.MessageCreated{Message: &convov1.Message{Id: "m1", Role: "assistant", Status: "processing", PromptId: "p1"}}),
		ev(2, &convov1.BlockStart{PromptId: "p1", MessageId: "m1", BlockId: "b2", BlockType: "text", Position: 2}),
		ev(3, &convov1.BlockStart{PromptId: "p1", MessageId: "m1", BlockId: "b0", BlockType: "tool_use", Position: 0}),
		ev(4, &convov1.BlockDelta{PromptId: "p1", BlockId: "b2", Content: "Hel"}),
		ev(5, &convov1.BlockDelta{PromptId: "p1", BlockId: "b2", Content: "lo"}),
		ev(6, &convov1.BlockEnd{PromptId: "p1", BlockId: "b2", Metadata: meta}),
		ev(7, &convov1.ToolCallStarted{ToolCall: &convov1.ToolCall{Id: "c", BlockId: "b0"}}),
		ev(8, &convov1.ToolCallCompleted{ToolCall: &convov1.ToolCall{Id: "c", BlockId: "b0", Status: "completed", Output: "42"}}),
		ev(9, &convov1.ConversationUpdated{}),
	)
	m := c.Message("m1")
	var order []string
	for _, b := range m.Blocks {
		order = append(order, b.ID)
	}
	if !reflect.DeepEqual(order, []string{"b0", "b2"}) {
		t.Errorf("blocks %v, want by position [b0 b2]", order)
	}
	b2 := c.Block("b2")
	if b2.Content() != "Hello" || !b2.Completed || b2.Metadata.GetFields()["k"].GetStringValue() != "v" || b2.Kind != Text {
		t.Errorf("b2 %+v: want Hello, completed, metadata k=v", b2)
	}
	if b0 := c.Block("b0"); b0.Output() != "42" || b0.Call.GetStatus() != "completed" {
		t.Errorf("b0 output %q status %q, want 42 completed", b0.Output(), b0.Call.GetStatus())
	}
	if got := c.Unfinished(); len(got) != 1 || got[0].ID != "m1" {
		t.Errorf("Unfinished %v, want m1", got)
	}
	if c.MessageOf("p1") != "m1" {
		t.Error("MessageOf(p1) is not m1")
	}
}

// A branch switch keeps the messages up to the fork and replaces the rest
// with the new path's; their blocks are gone from the conversation.
func TestPathSwitchKeepsUpToTheFork(t *testing.T) {
	c := New(&convov1.Snapshot{Messages: []*convov1.Message{
		{Id: "u1", Role: "user", Status: "completed"},
		{Id: "a1", Role: "assistant", Status: "completed", PromptId: "p1", Blocks: []*convov1.Block{{Id: "x", BlockType: "text", Content: "old"}}},
	}})
	fold(c, ev(1, &convov1.BranchSwitched{ForkMessageId: "u1", LeafMessageId: "a2", Messages: []*convov1.Message{
		{Id: "a2", Role: "assistant", Status: "completed", PromptId: "p2", Blocks: []*convov1.Block{{Id: "y", BlockType: "text", Content: "new"}}},
	}}))
	var ids []string
	for _, m := range c.Messages {
		ids = append(ids, m.ID)
	}
	if !reflect.DeepEqual(ids, []string{"u1", "a2"}) || c.Block("x") != nil || c.Block("y").Content() != "new" {
		t.Errorf("messages %v after the switch, want [u1 a2] with block y only", ids)
	}
}

// Replay builds a message as it stands: applied to a conversation that
// holds the message without its blocks, it gives the same blocks, and
// its changes are those a live stream would have made, in block order,
// then the prompt's input requests.
func TestReplayBuildsTheMessage(t *testing.T) {
	answer, _ := structpb.NewStruct(map[string]any{"approved": true})
	m := &convov1.Message{Id: "m1", Role: "assistant", Status: "processing", PromptId: "p1", Blocks: []*convov1.Block{
		{Id: "b0", BlockType: "reasoning", Content: "think", Status: "completed", Position: 0},
		{Id: "b1", BlockType: "tool_use", Content: `{"a":1}`, Status: "completed", Position: 1,
			ToolCall: &convov1.ToolCall{Id: "c1", BlockId: "b1", Name: "f", Status: "running"}},
		{Id: "b2", BlockType: "text", Content: "so far", Status: "streaming", Position: 2},
	}}
	inputs := []*convov1.InputRequest{
		{ToolCallId: "c1", PromptId: "p1", Kind: "approval", Status: "answered", Answer: answer},
		{ToolCallId: "other", PromptId: "p9", Kind: "question", Status: "pending"},
	}
	cs := Replay(m, inputs)
	var kinds []string
	for _, c := range cs {
		kinds = append(kinds, reflect.TypeOf(c).Name())
		if c.Prompt() != "p1" {
			t.Errorf("%T names prompt %q, want p1", c, c.Prompt())
		}
	}
	want := []string{"BlockStarted", "BlockAppended", "BlockEnded", "BlockStarted", "BlockAppended", "BlockEnded",
		"CallStarted", "BlockStarted", "BlockAppended", "InputRequested", "InputAnswered"}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("changes %v\nwant %v", kinds, want)
	}
	c := New(&convov1.Snapshot{Messages: []*convov1.Message{{Id: "m1", Role: "assistant", Status: "processing", PromptId: "p1"}}})
	c.Apply(cs...)
	got := c.Message("m1").Blocks
	if len(got) != 3 {
		t.Fatalf("%d blocks, want 3", len(got))
	}
	for i, b := range got {
		pb := m.Blocks[i]
		if b.ID != pb.Id || b.Content() != pb.Content || b.Completed != (pb.Status == "completed") {
			t.Errorf("block %d: %s %q completed=%v, want %s %q %s", i, b.ID, b.Content(), b.Completed, pb.Id, pb.Content, pb.Status)
		}
	}
	if got[1].Call.GetId() != "c1" {
		t.Error("the tool_use block lost its call")
	}
}
