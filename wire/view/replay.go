package view

import convov1 "github.com/convo-dev/convo/gen/convo/v1"

// Replay returns the changes that build message m as it stands: its blocks
// in order, each started, with its content so far, ended when it has
// ended, with its tool call started and ended as it has; then the input
// requests of m's prompt among inputs, in order, answered when they are.
// For a client that joins while m's reply is being written: the prompt's
// end comes later, as an event. The changes have no seq and no time.
func Replay(m *convov1.Message, inputs []*convov1.InputRequest) []Change {
	base := Base{PromptID: m.GetPromptId()}
	var out []Change
	for _, b := range m.GetBlocks() {
		id := b.GetId()
		out = append(out, BlockStarted{Base: base, BlockID: id, MessageID: m.GetId(), Type: b.GetBlockType(),
			Kind: KindOf(b.GetBlockType()), Position: b.GetPosition(), Metadata: b.GetMetadata()})
		if b.GetContent() != "" {
			out = append(out, BlockAppended{Base: base, BlockID: id, Delta: b.GetContent()})
		}
		if b.GetStatus() != "streaming" {
			out = append(out, BlockEnded{Base: base, BlockID: id, Metadata: b.GetMetadata()})
		}
		tc := b.GetToolCall()
		if tc == nil {
			continue
		}
		out = append(out, CallStarted{Base: base, BlockID: id, Call: tc, Input: tc.GetInput()})
		switch tc.GetStatus() {
		case "completed":
			out = append(out, CallEnded{Base: base, BlockID: id, Call: tc})
		case "failed":
			out = append(out, CallEnded{Base: base, BlockID: id, Call: tc, Failed: true, Error: tc.GetError()})
		}
	}
	for _, in := range inputs {
		if in.GetPromptId() != m.GetPromptId() {
			continue
		}
		out = append(out, InputRequested{Base: base, Request: in})
		if in.GetStatus() != "pending" {
			out = append(out, InputAnswered{Base: base, Answer: &convov1.InputAnswered{ToolCallId: in.GetToolCallId(),
				PromptId: in.GetPromptId(), Status: in.GetStatus(), Answer: in.GetAnswer(), AnsweredAt: in.GetAnsweredAt()}})
		}
	}
	return out
}
