package aisdk

import (
	"encoding/json"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
	"github.com/convo-dev/convo/wire/view"
)

// uiMessages is a conversation as the AI SDK's UIMessage list: every
// message in order with its blocks as parts, each part as the stream of
// its reply builds it (see uiReply), so that useChat shows a loaded reply
// exactly as it showed the streamed one. The state is the conversation's
// active path (docs/branches.md), so a regenerated reply's older versions
// are not in it, as useChat replaces a regenerated reply. A tool call's
// open input request shows as the stream shows it: approval-requested,
// approval-responded, a client tool or question handed to the client
// (input-available, not provider-executed), or its answer once given
// (output-available, output-error) until the worker ends the call. A
// failed reply carries why in its metadata ({"error": …}): the UIMessage
// schema has no error part, and the stream said it in an error chunk,
// which is not kept. A user message's files are file parts whose URLs
// urls signs. It fails only for stored JSON that does not decode
// (wire.Message).
func uiMessages(st conversation.State, urls wire.FileURLs) ([]uiMessage, error) {
	messages, err := wire.Messages(st.Messages)
	if err != nil {
		return nil, err
	}
	wire.SignFiles(urls, messages...)
	inputs, err := wire.InputRequests(st.PendingInputs)
	if err != nil {
		return nil, err
	}
	requests := map[string]*convov1.InputRequest{}
	for _, in := range inputs {
		requests[in.GetToolCallId()] = in
	}
	out := []uiMessage{}
	for _, m := range view.New(&convov1.Snapshot{Messages: messages}).Messages {
		um := uiMessage{ID: m.ID, Role: m.Role, Parts: []any{}}
		if m.Role == string(conversation.RoleAssistant) {
			um.Parts = assistantParts(m, requests)
			if m.Error != "" {
				um.Metadata = &uiMessageMetadata{Error: m.Error}
			}
		} else {
			for _, b := range m.Blocks {
				switch {
				case b.Kind == view.Text:
					um.Parts = append(um.Parts, &uiTextPart{Type: "text", Text: b.Content()})
				case b.Kind == view.File && b.File != nil:
					um.Parts = append(um.Parts, filePart(b.File))
				}
			}
		}
		out = append(out, um)
	}
	return out, nil
}

// filePart is a file a user message holds as the AI SDK's FileUIPart: its
// url convo's signed URL of the file's content, never a data URL.
func filePart(f *convov1.File) *uiFilePart {
	return &uiFilePart{Type: "file", MediaType: f.GetMediaType(), Filename: f.GetFilename(), URL: f.GetUrl()}
}

// assistantParts is an assistant message's parts, in block order, with
// the steps uiReply marks.
func assistantParts(m *view.Message, requests map[string]*convov1.InputRequest) []any {
	parts := []any{}
	stepOpen, afterTool := false, false
	for _, b := range m.Blocks {
		if !stepOpen || (afterTool && !b.Kind.IsTool()) {
			parts = append(parts, &uiStepStartPart{Type: "step-start"})
			stepOpen = true
		}
		afterTool = b.Kind.IsTool()
		state := "streaming"
		if b.Completed {
			state = "done"
		}
		switch b.Kind {
		case view.Text:
			parts = append(parts, &uiTextPart{Type: "text", Text: b.Content(), State: state})
		case view.Reasoning:
			parts = append(parts, &uiReasoningPart{Type: "reasoning", ID: b.ID, Text: b.Content(), State: state})
		case view.ToolUse:
			if p := toolPart(b, requests); p != nil {
				parts = append(parts, p)
			}
		case view.Structured:
			if b.Completed {
				parts = append(parts, &uiDataChunk{Type: "data-structured", ID: b.ID, Data: contentJSON(b.Content())})
			}
		case view.Other:
			if b.Completed {
				parts = append(parts, &uiDataChunk{Type: "data-" + b.Type, ID: b.ID, Data: otherData(b.Content(), structJSON(b.Metadata))})
			}
		}
	}
	return parts
}

// toolPart is a tool_use block's dynamic-tool part; nil while the stream
// has not opened it yet (no tool name so far).
func toolPart(b *view.Block, requests map[string]*convov1.InputRequest) *uiToolPart {
	name := wire.MetadataString(b.Metadata, "name")
	p := &uiToolPart{Type: "dynamic-tool", ToolCallID: b.ID, ProviderExecuted: true}
	tc := b.Call
	switch {
	case tc != nil:
		p.ToolName, p.Input = wire.ToolName(tc.GetName()), valueJSON(b.Input)
		switch tc.GetStatus() {
		case string(conversation.ToolCallCompleted):
			output := b.Output()
			p.State, p.Output = "output-available", &output
		case string(conversation.ToolCallFailed):
			p.State, p.ErrorText = "output-error", tc.GetError()
			if p.ErrorText == "" {
				p.ErrorText = "the tool call failed"
			}
		default:
			p.State = "input-available"
			if in, ok := requests[tc.GetId()]; ok {
				askedPart(p, in)
			}
		}
	case b.Completed:
		p.ToolName, p.State, p.Input = wire.ToolName(name), "input-available", contentJSON(b.Content())
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
func askedPart(p *uiToolPart, in *convov1.InputRequest) {
	status := conversation.InputStatus(in.GetStatus())
	if status == conversation.InputCancelled {
		return
	}
	kind := conversation.InputKind(in.GetKind())
	if kind == conversation.InputApproval {
		p.State = "approval-requested"
		p.Approval = &uiApproval{ID: in.GetToolCallId(), RequestReason: wire.MetadataString(in.GetRequest(), "message")}
		if status != conversation.InputPending {
			var a approvalAnswer
			_ = json.Unmarshal(structJSON(in.GetAnswer()), &a)
			p.State, p.Approval.Approved, p.Approval.Reason = "approval-responded", &a.Approved, a.Reason
		}
		return
	}
	p.ProviderExecuted = false
	p.ToolMetadata = askMetadata(kind, structJSON(in.GetRequest()))
	if status == conversation.InputPending {
		return
	}
	if in.GetAnswer() == nil {
		// Answered, its answer left out of the read for size (see
		// conversation.Store.RecentState): answered all the same.
		p.State, p.Output = "output-available", &answerLeftOut
		return
	}
	var a struct{ Output, Error, Answer *string }
	_ = json.Unmarshal(structJSON(in.GetAnswer()), &a)
	switch {
	case a.Error != nil:
		p.State, p.ErrorText = "output-error", *a.Error
	case a.Output != nil:
		p.State, p.Output = "output-available", a.Output
	case a.Answer != nil:
		p.State, p.Output = "output-available", a.Answer
	}
}
