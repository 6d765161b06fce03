package openai

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/wire/view"
)

// convo's own tools, those that run on the worker, are shown as an MCP
// server's ("server_label": "convo"): each call is an mcp_call item, "mcp_"
// and convo's tool call id, with its name, arguments, output and error.
//
// When a call's tool_use block starts the fold cannot yet know whether the
// call will ask for input (a declared client tool, a question, an
// approval: a function_call or an mcp_approval_request, foldtools.go), and
// it must not show one call twice. So a call becomes an mcp_call item at
// its first event that says it runs on the worker, its first output
// (toolCallProgress) or its end (toolCallCompleted, toolCallFailed), when
// it asked for no input, or asked for an approval that was given (then, as
// OpenAI's, the item has approval_request_id and is the continuation's).
// The item is added with its arguments whole (added, mcp_call.in_progress,
// one mcp_call_arguments.delta, mcp_call_arguments.done) and done at the
// call's end (mcp_call.completed or mcp_call.failed, output_item.done).
// Every trigger is one of the call's own events, none of which compaction
// merges, so a replay shows the item at the same sequence number.

// approved reports whether an approval's answer approved the call.
func approved(answer json.RawMessage) bool {
	var a struct {
		Approved bool `json:"approved"`
	}
	return json.Unmarshal(answer, &a) == nil && a.Approved
}

// ownCall reports whether the call is shown as an mcp_call: it asked for
// no input, or for an approval that was given.
func (c *callState) ownCall() bool {
	return c.kind == "" || c.kind == "approval" && approved(c.answer)
}

// callOfBlock is the call of tool_use block blockID, or nil.
func (r *reply) callOfBlock(blockID string) *callState {
	b := r.conv.Block(blockID)
	if b == nil || b.Call == nil {
		return nil
	}
	return r.calls[b.Call.GetId()]
}

// trackRan notes, whichever segment the fold shows, the segment in which
// an own call first showed it runs: the segment whose response shows it.
func (r *reply) trackRan(blockID string) {
	if c := r.callOfBlock(blockID); c != nil && c.mcpIn < 0 && c.ownCall() {
		c.mcpIn = r.waits
	}
}

// ran shows an own call's output or end (ended; failed: it failed) in the
// segment the fold shows: the item added at its first, done at its end.
func (r *reply) ran(blockID string, ended, failed bool, emit func(streamEvent)) {
	c := r.callOfBlock(blockID)
	if c == nil || c.mcpIn != r.segment {
		return
	}
	it := c.item
	if it == nil {
		it = &item{call: c, block: r.conv.Block(blockID), mcp: true, id: "mcp_" + c.id, index: len(r.items), status: statusInProgress}
		c.item = it
		r.items = append(r.items, it)
		added := it.mcpItem(false)
		emit(streamEvent{Type: "response.output_item.added", OutputIndex: ptr(it.index), Item: &added})
		emit(streamEvent{Type: "response.mcp_call.in_progress", ItemID: it.id, OutputIndex: ptr(it.index)})
		args := c.mcpArguments(it.block)
		emit(streamEvent{Type: "response.mcp_call_arguments.delta", ItemID: it.id, OutputIndex: ptr(it.index), Delta: &args})
		emit(streamEvent{Type: "response.mcp_call_arguments.done", ItemID: it.id, OutputIndex: ptr(it.index), Arguments: &args})
	}
	if !ended || it.status != statusInProgress {
		return
	}
	if failed {
		it.status = statusFailed
		emit(streamEvent{Type: "response.mcp_call.failed", ItemID: it.id, OutputIndex: ptr(it.index)})
	} else {
		it.status = statusCompleted
		emit(streamEvent{Type: "response.mcp_call.completed", ItemID: it.id, OutputIndex: ptr(it.index)})
	}
	done := it.output()
	emit(streamEvent{Type: "response.output_item.done", OutputIndex: ptr(it.index), Item: &done})
}

// closeCall closes an mcp_call item still open when the prompt waits or
// ends (status incomplete): output_item.done alone, since the call did not
// end.
func (r *reply) closeCall(it *item, status string, emit func(streamEvent)) {
	it.status = status
	done := it.output()
	emit(streamEvent{Type: "response.output_item.done", OutputIndex: ptr(it.index), Item: &done})
}

// mcpArguments are the call's arguments: its input as JSON (the tool
// call's input GetConversation shows), else the block's text.
func (c *callState) mcpArguments(b *view.Block) string {
	if b != nil && b.Input != nil {
		if args, err := json.Marshal(b.Input.AsInterface()); err == nil {
			return string(args)
		}
	}
	if b != nil && b.Content() != "" {
		return b.Content()
	}
	return "{}"
}

// mcpCallItem is the JSON of an mcp_call item, as openai-go's
// ResponseOutputItemMcpCall reads it.
type mcpCallItem struct {
	Type              string        `json:"type"`
	ID                string        `json:"id"`
	ServerLabel       string        `json:"server_label"`
	Name              string        `json:"name"`
	Arguments         string        `json:"arguments"`
	Output            *string       `json:"output"`
	Error             *mcpCallError `json:"error"`
	Status            string        `json:"status"`
	ApprovalRequestID *string       `json:"approval_request_id"`
}

// mcpCallError is a failed call's error: a tool execution error whose
// content is the error's text, as an MCP tool result's content is.
type mcpCallError struct {
	Type    string           `json:"type"`
	Content []mcpTextContent `json:"content"`
}

type mcpTextContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// newMCPCallItem is an mcp_call item of call id, named name with
// arguments, whose output so far is output: null until the call wrote
// some or completed; errMsg a failed call's error.
func newMCPCallItem(id, name, arguments, output, errMsg, status string, approval bool) outputItem {
	m := mcpCallItem{Type: "mcp_call", ID: "mcp_" + id, ServerLabel: mcpServerLabel, Name: name, Arguments: arguments, Status: status}
	if output != "" || status == statusCompleted {
		m.Output = &output
	}
	if status == statusFailed {
		m.Error = &mcpCallError{Type: "mcp_tool_execution_error", Content: []mcpTextContent{{Type: "text", Text: errMsg}}}
	}
	if approval {
		req := "mcpr_" + id
		m.ApprovalRequestID = &req
	}
	raw, _ := json.Marshal(m)
	return outputItem{Type: m.Type, ID: m.ID, Status: status, raw: raw}
}

// mcpItem is the mcp_call item as it stands; without arguments (empty) for
// output_item.added, whose arguments follow as their own events.
func (it *item) mcpItem(withArguments bool) outputItem {
	c, b := it.call, it.block
	args := ""
	if withArguments {
		args = c.mcpArguments(b)
	}
	errMsg := b.Call.GetError()
	if errMsg == "" {
		errMsg = "the tool call failed"
	}
	return newMCPCallItem(c.id, c.name, args, b.Output(), errMsg, it.status, c.kind == "approval")
}

// callInputs are the input requests of the tool calls of st's messages, by
// call: what conversation items need to tell an own call (an mcp_call)
// from a function_call or an approval request.
func (h *Handler) callInputs(ctx context.Context, st conversation.State) (map[uuid.UUID]conversation.InputRequest, error) {
	var ids []uuid.UUID
	for _, m := range st.Messages {
		for _, b := range m.Blocks {
			if b.ToolCall != nil {
				ids = append(ids, b.ToolCall.ID)
			}
		}
	}
	reqs, err := h.srv.Store.ToolCallInputs(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]conversation.InputRequest, len(reqs))
	for _, q := range reqs {
		out[q.ToolCallID] = q
	}
	return out, nil
}

// mcpCallOf is a tool_use block's call as the conversation's mcp_call item,
// the item its response shows once the call ended: false for a call that
// asked for input other than a given approval, and for one that has not
// yet written output or ended (the fold shows it from then on).
func mcpCallOf(b conversation.Block, inputs map[uuid.UUID]conversation.InputRequest) (outputItem, bool) {
	tc := b.ToolCall
	if tc == nil || tc.Status == conversation.ToolCallStarted {
		return outputItem{}, false
	}
	q, asked := inputs[tc.ID]
	if asked && (q.Kind != conversation.InputApproval || !approved(q.Answer)) {
		return outputItem{}, false
	}
	status := statusInProgress
	switch tc.Status {
	case conversation.ToolCallCompleted:
		status = statusCompleted
	case conversation.ToolCallFailed:
		status = statusFailed
	}
	// The arguments as the fold writes them (from the call's input as a
	// structpb value): compact, keys sorted, numbers as float64.
	args := "{}"
	var v any
	if json.Unmarshal(tc.Input, &v) == nil {
		if raw, err := json.Marshal(v); err == nil {
			args = string(raw)
		}
	}
	errMsg := tc.Error
	if errMsg == "" {
		errMsg = "the tool call failed"
	}
	return newMCPCallItem(tc.ID.String(), tc.Name, args, tc.Output, errMsg, status, asked), true
}
