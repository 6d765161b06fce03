package view

import convov1 "github.com/convo-dev/convo/gen/convo/v1"

// Reader turns a conversation's events into Changes. Of the conversation
// it knows only which prompt each block belongs to, so that a tool call's
// changes (whose events name only their block) name their prompt too: a
// protocol that keeps no Conversation (an AI SDK reply follows one
// prompt) reads with a Reader of its own.
type Reader struct {
	// prompts names the prompt of every block seen, those of messages
	// since removed included.
	prompts map[string]string
}

// NewReader returns a Reader that knows no block yet.
func NewReader() *Reader { return &Reader{prompts: map[string]string{}} }

// Learn records the prompt of each of m's blocks (a snapshot's message,
// read before the events that follow it).
func (r *Reader) Learn(m *convov1.Message) {
	for _, b := range m.GetBlocks() {
		r.prompts[b.GetId()] = m.GetPromptId()
	}
}

// Read returns the changes ev makes, in order. An event that changes
// nothing a protocol shows (conversation_updated) makes none.
func (r *Reader) Read(ev *convov1.Event) []Change {
	base := Base{EventSeq: ev.GetSeq()}
	if t := ev.GetCreatedAt(); t != nil {
		base.At = t.AsTime()
	}
	of := func(promptID string) Base { b := base; b.PromptID = promptID; return b }
	// The events of pauses carry the reply's message: its status changes
	// first, as for a client that does not ask for pause events.
	paused := func(m *convov1.Message, then Change) []Change {
		if m == nil {
			return []Change{then}
		}
		return []Change{MessageChanged{Base: base, Message: m}, then}
	}
	switch k := ev.GetKind().(type) {
	case *convov1.Event_MessageCreated:
		if m := k.MessageCreated.GetMessage(); m != nil {
			return []Change{MessageAdded{Base: base, Message: m}}
		}
	case *convov1.Event_MessageUpdated:
		if m := k.MessageUpdated.GetMessage(); m != nil {
			return []Change{MessageChanged{Base: base, Message: m}}
		}
	case *convov1.Event_HistoryCleared:
		return []Change{HistoryCleared{Base: base}}
	case *convov1.Event_BranchSwitched:
		for _, m := range k.BranchSwitched.GetMessages() {
			r.Learn(m)
		}
		return []Change{PathSwitched{Base: base, Switch: k.BranchSwitched}}
	case *convov1.Event_PromptQueued:
		p := k.PromptQueued.GetPrompt()
		return []Change{PromptQueued{Base: of(p.GetId()), MessageID: p.GetMessageId()}}
	case *convov1.Event_PromptStarted:
		return []Change{PromptStarted{Base: of(k.PromptStarted.GetPrompt().GetId())}}
	case *convov1.Event_PromptCompleted:
		return []Change{PromptEnded{Base: of(k.PromptCompleted.GetPrompt().GetId()), Outcome: Completed}}
	case *convov1.Event_PromptFailed:
		return []Change{PromptEnded{Base: of(k.PromptFailed.GetPrompt().GetId()), Outcome: Failed, Error: k.PromptFailed.GetError()}}
	case *convov1.Event_PromptCancelled:
		return []Change{PromptEnded{Base: of(k.PromptCancelled.GetPrompt().GetId()), Outcome: Cancelled}}
	case *convov1.Event_BlockStart:
		s := k.BlockStart
		r.prompts[s.GetBlockId()] = s.GetPromptId()
		return []Change{BlockStarted{Base: of(s.GetPromptId()), BlockID: s.GetBlockId(), MessageID: s.GetMessageId(),
			Type: s.GetBlockType(), Kind: KindOf(s.GetBlockType()), Position: s.GetPosition(), Metadata: s.GetMetadata()}}
	case *convov1.Event_BlockDelta:
		d := k.BlockDelta
		return []Change{BlockAppended{Base: of(d.GetPromptId()), BlockID: d.GetBlockId(), Delta: d.GetContent()}}
	case *convov1.Event_BlockEnd:
		e := k.BlockEnd
		return []Change{BlockEnded{Base: of(e.GetPromptId()), BlockID: e.GetBlockId(), Metadata: e.GetMetadata()}}
	case *convov1.Event_ToolCallStarted:
		tc := k.ToolCallStarted.GetToolCall()
		input := k.ToolCallStarted.GetInput()
		if input == nil {
			input = tc.GetInput()
		}
		return []Change{CallStarted{Base: of(r.prompts[tc.GetBlockId()]), BlockID: tc.GetBlockId(), Call: tc, Input: input}}
	case *convov1.Event_ToolCallProgress:
		p := k.ToolCallProgress
		return []Change{CallProgressed{Base: of(r.prompts[p.GetBlockId()]), BlockID: p.GetBlockId(), Output: p.GetOutput()}}
	case *convov1.Event_ToolCallCompleted:
		tc := k.ToolCallCompleted.GetToolCall()
		return []Change{CallEnded{Base: of(r.prompts[tc.GetBlockId()]), BlockID: tc.GetBlockId(), Call: tc}}
	case *convov1.Event_ToolCallFailed:
		tc := k.ToolCallFailed.GetToolCall()
		errText := k.ToolCallFailed.GetError()
		if errText == "" {
			errText = tc.GetError()
		}
		return []Change{CallEnded{Base: of(r.prompts[tc.GetBlockId()]), BlockID: tc.GetBlockId(), Call: tc, Failed: true, Error: errText}}
	case *convov1.Event_InputRequested:
		in := k.InputRequested.GetInputRequest()
		return paused(k.InputRequested.GetMessage(), InputRequested{Base: of(in.GetPromptId()), Request: in})
	case *convov1.Event_InputAnswered:
		a := k.InputAnswered
		return paused(a.GetMessage(), InputAnswered{Base: of(a.GetPromptId()), Answer: a})
	case *convov1.Event_InputClaimed:
		if m := k.InputClaimed.GetMessage(); m != nil {
			return []Change{MessageChanged{Base: base, Message: m}}
		}
	case *convov1.Event_PromptWaiting:
		return paused(k.PromptWaiting.GetMessage(), PromptWaiting{Base: of(k.PromptWaiting.GetPrompt().GetId())})
	}
	return nil
}
