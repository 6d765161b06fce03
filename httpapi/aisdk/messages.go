package aisdk

import (
	"encoding/json"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/wire"
)

// uiMessages is a conversation as the AI SDK's UIMessage list: every
// message in order with its blocks as parts, each part as the stream of
// its reply builds it (see uiReply), so that useChat shows a loaded reply
// exactly as it showed the streamed one. The state is the conversation's
// active path (docs/branches.md), so a regenerated reply's older versions
// are not in it, as useChat replaces a regenerated reply. A tool call's
// open input request
// shows as the stream shows it: approval-requested, approval-responded,
// a client tool or question handed to the client (input-available, not
// provider-executed), or its answer once given (output-available,
// output-error) until the worker ends the call. A failed reply carries
// why in its metadata ({"error": …}): the UIMessage schema has no error
// part, and the stream said it in an error chunk, which is not kept.
func uiMessages(st conversation.State) []uiMessage {
	requests := map[uuid.UUID]conversation.InputRequest{}
	for _, in := range st.PendingInputs {
		requests[in.ToolCallID] = in
	}
	out := []uiMessage{}
	for _, m := range st.Messages {
		um := uiMessage{ID: m.ID.String(), Role: string(m.Role), Parts: []any{}}
		if m.Role == conversation.RoleAssistant {
			um.Parts = assistantParts(m, requests)
			if m.Error != "" {
				um.Metadata = &uiMessageMetadata{Error: m.Error}
			}
		} else {
			for _, b := range m.Blocks {
				if b.Type == "text" {
					um.Parts = append(um.Parts, &uiTextPart{Type: "text", Text: b.Content})
				}
			}
		}
		out = append(out, um)
	}
	return out
}

// assistantParts is an assistant message's parts, in block order, with
// the steps uiReply marks.
func assistantParts(m conversation.Message, requests map[uuid.UUID]conversation.InputRequest) []any {
	parts := []any{}
	stepOpen, afterTool := false, false
	for _, b := range m.Blocks {
		kind := uiKindOf(b.Type)
		if !stepOpen || (afterTool && !kind.isTool()) {
			parts = append(parts, &uiStepStartPart{Type: "step-start"})
			stepOpen = true
		}
		afterTool = kind.isTool()
		ended := b.Status == conversation.BlockCompleted
		state := "streaming"
		if ended {
			state = "done"
		}
		switch kind {
		case uiKindText:
			parts = append(parts, &uiTextPart{Type: "text", Text: b.Content, State: state})
		case uiKindReasoning:
			parts = append(parts, &uiReasoningPart{Type: "reasoning", ID: b.ID.String(), Text: b.Content, State: state})
		case uiKindTool:
			if p := toolPart(b, requests); p != nil {
				parts = append(parts, p)
			}
		case uiKindStructured:
			if ended {
				parts = append(parts, &uiDataChunk{Type: "data-structured", ID: b.ID.String(), Data: contentJSON(b.Content)})
			}
		case uiKindOther:
			if ended {
				parts = append(parts, &uiDataChunk{Type: "data-" + b.Type, ID: b.ID.String(), Data: otherData(b.Content, b.Metadata)})
			}
		}
	}
	return parts
}

// toolPart is a tool_use block's dynamic-tool part; nil while the stream
// has not opened it yet (no tool name so far).
func toolPart(b conversation.Block, requests map[uuid.UUID]conversation.InputRequest) *uiToolPart {
	name := jsonString(b.Metadata, "name")
	p := &uiToolPart{Type: "dynamic-tool", ToolCallID: b.ID.String(), ProviderExecuted: true}
	tc := b.ToolCall
	switch {
	case tc != nil:
		p.ToolName, p.Input = wire.ToolName(tc.Name), json.RawMessage("null")
		if len(tc.Input) > 0 {
			p.Input = storedJSON(tc.Input)
		}
		switch tc.Status {
		case conversation.ToolCallCompleted:
			p.State, p.Output = "output-available", &tc.Output
		case conversation.ToolCallFailed:
			p.State, p.ErrorText = "output-error", tc.Error
			if p.ErrorText == "" {
				p.ErrorText = "the tool call failed"
			}
		default:
			p.State = "input-available"
			if in, ok := requests[tc.ID]; ok {
				askedPart(p, in)
			}
		}
	case b.Status == conversation.BlockCompleted:
		p.ToolName, p.State, p.Input = wire.ToolName(name), "input-available", contentJSON(b.Content)
	case name != "":
		p.ToolName, p.State = name, "input-streaming"
	default:
		return nil
	}
	return p
}

// answerLeftOut is the output of a client tool or question answered, whose
// answer a bounded read left out: the reply's worker reads the answer
// itself, and the tool's output shows it once the reply resumes.
var answerLeftOut = "(answered; the answer is left out here for its size, and shows as the tool's output once the reply resumes)"

// askedPart sets an open tool call's part to its input request's state.
func askedPart(p *uiToolPart, in conversation.InputRequest) {
	if in.Status == conversation.InputCancelled {
		return
	}
	if in.Kind == conversation.InputApproval {
		p.State = "approval-requested"
		p.Approval = &uiApproval{ID: in.ToolCallID.String(), RequestReason: jsonString(in.Request, "message")}
		if in.Status != conversation.InputPending {
			var a approvalAnswer
			_ = json.Unmarshal(in.Answer, &a)
			p.State, p.Approval.Approved, p.Approval.Reason = "approval-responded", &a.Approved, a.Reason
		}
		return
	}
	p.ProviderExecuted = false
	p.ToolMetadata = askMetadata(in.Kind, in.Request)
	if in.Status == conversation.InputPending {
		return
	}
	if in.Answer == nil {
		// Answered, its answer left out of the read for size (see
		// conversation.Store.RecentState): answered all the same.
		p.State, p.Output = "output-available", &answerLeftOut
		return
	}
	var a struct{ Output, Error, Answer *string }
	_ = json.Unmarshal(in.Answer, &a)
	switch {
	case a.Error != nil:
		p.State, p.ErrorText = "output-error", *a.Error
	case a.Output != nil:
		p.State, p.Output = "output-available", a.Output
	case a.Answer != nil:
		p.State, p.Output = "output-available", a.Answer
	}
}
