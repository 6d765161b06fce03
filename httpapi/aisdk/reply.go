package aisdk

import (
	"bytes"
	"encoding/json"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/internal/jsonlimit"
	"github.com/convo-dev/convo/wire"
	"github.com/convo-dev/convo/wire/view"
)

// uiReply turns one prompt's reply into UI message stream chunks: start
// (with the assistant message's id), the reply's blocks as parts, in
// steps, and the end the prompt came to (finish, error then finish, or
// abort). It starts from what the reply holds at a snapshot (so that a
// stream joined late carries the reply from its first character), then
// takes the conversation's live events; events of other prompts are
// ignored.
//
// A step is a model call: a new one begins where a block that is not a
// tool's (text, reasoning, …) follows a tool_use or tool_result block.
// Every tool_use block is a dynamic-tool part whose toolCallId is the
// block's id; its tool call's output or error ends it (tool_result blocks
// repeat that output and make no part). A structured block is a
// data-structured part holding its JSON; any other block type a
// data-<type> part holding {content, metadata}.
//
// Pauses (docs/protocols.md): an approval request is the
// tool-approval-request chunk (approvalId convo's tool call id, the part
// then approval-requested), its answer tool-approval-response, and a
// denied call's end tool-output-denied; a client tool's run or a question
// hands the part to the client (tool-input-available again, not
// provider-executed, toolMetadata.convoInput naming the request), which
// answers with addToolOutput. The prompt's wait ends the stream as a
// model's tool calls end a step: finish-step, finish "tool-calls".
//
// Per delta the work is O(1) in the block's length. It is not safe for
// concurrent use.
type uiReply struct {
	promptID, messageID string
	// reader reads the conversation's events as changes.
	reader              *view.Reader
	blocks              map[string]*uiBlock
	calls               map[string]*uiBlock // by convo's tool call id
	order               []*uiBlock          // in start order
	stepOpen, afterTool bool
	done                bool
	out                 []any
}

// uiBlock is what the stream has sent of one block.
type uiBlock struct {
	id, typ string
	kind    view.Kind
	open    bool // text, reasoning: started, not yet ended
	// tool_use blocks: whether tool-input-start and tool-input-available
	// were sent, and the tool's name when known.
	started, available bool
	name               string
	// callID is convo's tool call id, input its input; ask the kind of
	// its input request, denied whether an approval was refused.
	callID string
	input  json.RawMessage
	ask    conversation.InputKind
	denied bool
	// content is the block's text, for the parts sent only at its end
	// (data-*, a tool call's input when no call names it).
	content strings.Builder
}

func newUIReply(promptID, messageID string) *uiReply {
	r := &uiReply{promptID: promptID, messageID: messageID, reader: view.NewReader(),
		blocks: map[string]*uiBlock{}, calls: map[string]*uiBlock{}}
	r.emit(&uiStartChunk{Type: uiStart, MessageID: messageID})
	return r
}

// resume feeds the reply as message m holds it at a snapshot (view.Replay:
// its blocks in order, each with its content so far, ended when it has
// ended, with its tool call; then its prompt's input requests among
// inputs, answered when they are). The message is still being written:
// the prompt's end comes as an event.
func (r *uiReply) resume(m conversation.Message, inputs []conversation.InputRequest) error {
	pm, err := wire.Message(m)
	if err != nil {
		return err
	}
	pi, err := wire.InputRequests(inputs)
	if err != nil {
		return err
	}
	r.reader.Learn(pm)
	for _, c := range view.Replay(pm, pi) {
		r.change(c)
	}
	return nil
}

// continued is the reply as a client that holds m (its assistant message
// as the stream built it, with its input requests) sees it continue: the
// start chunk, then only what follows.
func continued(m conversation.Message, inputs []conversation.InputRequest) (*uiReply, error) {
	r := newUIReply(m.PromptID.UUID.String(), m.ID.String())
	start := r.flush()
	if err := r.resume(m, inputs); err != nil {
		return nil, err
	}
	r.out = start
	return r, nil
}

// apply takes the conversation's next event.
func (r *uiReply) apply(ev *convov1.Event) {
	for _, c := range r.reader.Read(ev) {
		r.change(c)
	}
}

// change takes one change of the conversation: those of this reply's
// prompt (its tool calls' by their blocks) make chunks, others nothing.
func (r *uiReply) change(c view.Change) {
	if r.done {
		return
	}
	ours := c.Prompt() == r.promptID
	switch c := c.(type) {
	case view.BlockStarted:
		if ours {
			r.blockStart(c.BlockID, c.Type, c.Kind, wire.MetadataString(c.Metadata, "name"))
		}
	case view.BlockAppended:
		if ours {
			r.blockDelta(c.BlockID, c.Delta)
		}
	case view.BlockEnded:
		if ours {
			r.blockEnd(c.BlockID, structJSON(c.Metadata))
		}
	case view.CallStarted:
		r.toolStarted(c.BlockID, c.Call.GetId(), c.Call.GetName(), valueJSON(c.Input))
	case view.CallEnded:
		if c.Failed {
			r.toolFailed(c.BlockID, c.Error)
		} else {
			r.toolCompleted(c.BlockID, c.Call.GetOutput())
		}
	case view.InputRequested:
		if ours {
			in := c.Request
			r.inputRequested(in.GetToolCallId(), conversation.InputKind(in.GetKind()), structJSON(in.GetRequest()))
		}
	case view.InputAnswered:
		if ours {
			a := c.Answer
			r.inputAnswered(a.GetToolCallId(), conversation.InputStatus(a.GetStatus()), structJSON(a.GetAnswer()))
		}
	case view.PromptWaiting:
		if ours {
			r.finish(uiFinishPause, "")
		}
	case view.PromptEnded:
		if !ours {
			return
		}
		switch c.Outcome {
		case view.Completed:
			r.finish(uiFinishStop, "")
		case view.Failed:
			r.finish(uiFinishError, c.Error)
		case view.Cancelled:
			r.abort()
		}
	}
}

func (r *uiReply) emit(c any) { r.out = append(r.out, c) }

// flush returns the chunks made since the last flush.
func (r *uiReply) flush() []any {
	out := r.out
	r.out = nil
	return out
}

func (r *uiReply) blockStart(id, typ string, kind view.Kind, name string) {
	if r.done || r.blocks[id] != nil {
		return
	}
	b := &uiBlock{id: id, typ: typ, kind: kind, name: name}
	r.blocks[id] = b
	r.order = append(r.order, b)
	switch {
	case !r.stepOpen:
		r.emit(&uiTypeOnly{Type: uiStartStep})
		r.stepOpen = true
	case r.afterTool && !b.kind.IsTool():
		r.emit(&uiTypeOnly{Type: uiFinishStep})
		r.emit(&uiTypeOnly{Type: uiStartStep})
	}
	r.afterTool = b.kind.IsTool()
	switch b.kind {
	case view.Text:
		b.open = true
		r.emit(&uiPartChunk{Type: uiTextStart, ID: id})
	case view.Reasoning:
		b.open = true
		r.emit(&uiPartChunk{Type: uiReasoningStart, ID: id})
	case view.ToolUse:
		if name != "" {
			r.startTool(b)
		}
	}
}

func (r *uiReply) startTool(b *uiBlock) {
	b.started = true
	r.emit(&uiToolInputStartChunk{Type: uiToolInputStart, ToolCallID: b.id, ToolName: wire.ToolName(b.name),
		Dynamic: true, ProviderExecuted: true})
}

func (r *uiReply) blockDelta(id, delta string) {
	b := r.blocks[id]
	if r.done || b == nil || delta == "" {
		return
	}
	switch b.kind {
	case view.Text:
		if b.open {
			r.emit(&uiDeltaChunk{Type: uiTextDelta, ID: id, Delta: delta})
		}
	case view.Reasoning:
		if b.open {
			r.emit(&uiDeltaChunk{Type: uiReasoningDelta, ID: id, Delta: delta})
		}
	case view.ToolUse:
		b.content.WriteString(delta)
		if b.started && !b.available {
			r.emit(&uiToolInputDeltaChunk{Type: uiToolInputDelta, ToolCallID: id, InputTextDelta: delta})
		}
	case view.Structured, view.Other:
		b.content.WriteString(delta)
	}
}

// blockEnd ends a block with its final metadata (a JSON object).
func (r *uiReply) blockEnd(id string, metadata json.RawMessage) {
	b := r.blocks[id]
	if r.done || b == nil {
		return
	}
	switch b.kind {
	case view.Text, view.Reasoning:
		r.closePart(b)
	case view.ToolUse:
		if !b.available {
			// No tool call (yet): the block's content is the input.
			r.inputAvailable(b, jsonString(metadata, "name"), contentJSON(b.content.String()))
		}
	case view.Structured:
		r.emit(&uiDataChunk{Type: "data-structured", ID: id, Data: contentJSON(b.content.String())})
	case view.Other:
		r.emit(&uiDataChunk{Type: "data-" + b.typ, ID: id, Data: otherData(b.content.String(), metadata)})
	}
}

func (r *uiReply) closePart(b *uiBlock) {
	if !b.open {
		return
	}
	b.open = false
	typ := uiTextEnd
	if b.kind == view.Reasoning {
		typ = uiReasoningEnd
	}
	r.emit(&uiPartChunk{Type: typ, ID: b.id})
}

func (r *uiReply) inputAvailable(b *uiBlock, name string, input json.RawMessage) {
	if name != "" {
		b.name = name
	}
	if !b.started {
		r.startTool(b)
	}
	b.available = true
	r.emit(&uiToolInputAvailableChunk{Type: uiToolInputAvailable, ToolCallID: b.id, ToolName: wire.ToolName(b.name),
		Input: input, Dynamic: true, ProviderExecuted: true})
}

// tool returns the tool_use block blockID of this reply.
func (r *uiReply) tool(blockID string) *uiBlock {
	if b := r.blocks[blockID]; b != nil && b.kind == view.ToolUse && !r.done {
		return b
	}
	return nil
}

func (r *uiReply) toolStarted(blockID, callID, name string, input json.RawMessage) {
	b := r.tool(blockID)
	if b == nil {
		return
	}
	b.callID, b.input = callID, input
	r.calls[callID] = b
	if !b.available {
		r.inputAvailable(b, name, input)
	}
}

// inputRequested asks the client for the input the tool call callID
// waits for (see uiReply).
func (r *uiReply) inputRequested(callID string, kind conversation.InputKind, request json.RawMessage) {
	b := r.calls[callID]
	if r.done || b == nil || b.ask != "" {
		return
	}
	b.ask = kind
	if kind == conversation.InputApproval {
		r.emit(&uiToolApprovalRequestChunk{Type: uiToolApprovalReq, ApprovalID: callID, ToolCallID: b.id,
			Reason: jsonString(request, "message")})
		return
	}
	r.emit(&uiToolInputAskChunk{Type: uiToolInputAvailable, ToolCallID: b.id, ToolName: wire.ToolName(b.name),
		Input: inputOrNull(b.input), Dynamic: true, ToolMetadata: askMetadata(kind, request)})
}

// inputAnswered records the answer to the tool call's request: an
// approval's decision is the tool-approval-response chunk (an expired
// approval is a denial); other answers show in the tool call's output.
func (r *uiReply) inputAnswered(callID string, status conversation.InputStatus, answer json.RawMessage) {
	b := r.calls[callID]
	if r.done || b == nil || b.ask != conversation.InputApproval || status == conversation.InputCancelled {
		return
	}
	var a approvalAnswer
	_ = json.Unmarshal(answer, &a)
	b.denied = !a.Approved
	r.emit(&uiToolApprovalResponseChunk{Type: uiToolApprovalResp, ApprovalID: callID, Approved: a.Approved, Reason: a.Reason})
}

// approvalAnswer is an approval request's answer.
type approvalAnswer struct {
	Approved bool   `json:"approved"`
	Reason   string `json:"reason"`
}

// askMetadata is the toolMetadata of a tool part handed to the client.
func askMetadata(kind conversation.InputKind, request json.RawMessage) map[string]any {
	in := map[string]any{"kind": string(kind)}
	if len(request) > 0 && string(request) != "null" {
		in["request"] = storedJSON(request)
	}
	return map[string]any{"convoInput": in}
}

func inputOrNull(input json.RawMessage) json.RawMessage {
	if len(input) == 0 {
		return json.RawMessage("null")
	}
	return storedJSON(input)
}

func (r *uiReply) toolCompleted(blockID, output string) {
	if b := r.tool(blockID); b != nil {
		if !b.available {
			r.inputAvailable(b, "", contentJSON(b.content.String()))
		}
		if b.denied {
			r.emit(&uiToolOutputDeniedChunk{Type: uiToolOutputDenied, ToolCallID: blockID})
			return
		}
		r.emit(&uiToolOutputAvailableChunk{Type: uiToolOutputAvail, ToolCallID: blockID, Output: output})
	}
}

func (r *uiReply) toolFailed(blockID, errText string) {
	if b := r.tool(blockID); b != nil {
		if !b.available {
			r.inputAvailable(b, "", contentJSON(b.content.String()))
		}
		if b.denied {
			r.emit(&uiToolOutputDeniedChunk{Type: uiToolOutputDenied, ToolCallID: blockID})
			return
		}
		if errText == "" {
			errText = "the tool call failed"
		}
		r.emit(&uiToolOutputErrorChunk{Type: uiToolOutputError, ToolCallID: blockID, ErrorText: errText})
	}
}

// closeAll ends the parts still open (convo ends a prompt's blocks before
// the prompt, so normally none).
func (r *uiReply) closeAll() {
	for _, b := range r.order {
		r.closePart(b)
	}
}

// finish ends the reply: finish-step, then for a failed prompt the error,
// then finish with its reason (and a failed prompt's error as the
// message's metadata, which /messages serves too).
func (r *uiReply) finish(reason, errText string) {
	if r.done {
		return
	}
	r.closeAll()
	if r.stepOpen {
		r.emit(&uiTypeOnly{Type: uiFinishStep})
	}
	finish := &uiFinishChunk{Type: uiFinish, FinishReason: reason}
	if reason == uiFinishError {
		if errText == "" {
			errText = "the reply failed"
		} else {
			finish.MessageMetadata = &uiMessageMetadata{Error: errText}
		}
		r.emit(&uiErrorChunk{Type: uiError, ErrorText: errText})
	}
	r.emit(finish)
	r.done = true
}

// abort ends a cancelled reply with the protocol's abort chunk.
func (r *uiReply) abort() {
	if r.done {
		return
	}
	r.closeAll()
	r.emit(&uiAbortChunk{Type: uiAbort, Reason: "the reply was cancelled"})
	r.done = true
}

// contentJSON is a block's content as a JSON value: itself when it is
// valid JSON (with storedJSON's placeholders), else a JSON string holding
// it (null when empty).
func contentJSON(content string) json.RawMessage {
	trimmed := strings.TrimSpace(content)
	if trimmed == "" {
		return json.RawMessage("null")
	}
	if json.Valid([]byte(trimmed)) {
		return storedJSON(json.RawMessage(trimmed))
	}
	b, _ := json.Marshal(content)
	return b
}

// otherData is the data of a block of a type the protocol has no part for.
func otherData(content string, metadata json.RawMessage) map[string]any {
	d := map[string]any{"content": content}
	if len(bytes.TrimSpace(metadata)) > 0 && string(bytes.TrimSpace(metadata)) != "{}" {
		d["metadata"] = storedJSON(metadata)
	}
	return d
}

// storedJSON is stored JSON (a tool call's input, a block's metadata, an
// input request) as this protocol passes it through, unparsed: a value
// that breaks convo's rule for JSON, which only a database written before
// the rule was applied at every door can hold, reads as
// jsonlimit.Sanitize's marked placeholder, as it does in every other
// protocol (wire), instead of 1e400 (Infinity to a browser) or, nested
// past encoding/json's limit, a failed write of the whole chunk. Valid
// JSON comes back as it is.
func storedJSON(raw json.RawMessage) json.RawMessage {
	return jsonlimit.Sanitize(raw)
}

// structJSON is a protobuf Struct as a JSON object (null when absent).
func structJSON(s *structpb.Struct) json.RawMessage {
	if s == nil {
		return nil
	}
	b, err := s.MarshalJSON()
	if err != nil {
		return nil
	}
	return b
}

// valueJSON is a protobuf JSON value as JSON (null when absent).
func valueJSON(v *structpb.Value) json.RawMessage {
	if v == nil {
		return json.RawMessage("null")
	}
	b, err := v.MarshalJSON()
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// jsonString reads a string field of a JSON object ("" when absent).
func jsonString(obj json.RawMessage, key string) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(obj, &fields) != nil {
		return ""
	}
	var s string
	_ = json.Unmarshal(fields[key], &s)
	return s
}
