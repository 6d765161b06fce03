package openai

import (
	"encoding/json"

	"github.com/convo-dev/convo/wire/view"
)

// callState is what the fold knows of one of the prompt's tool calls:
// what it is, whether it asks for input, and how that was answered.
type callState struct {
	id, name, blockID string
	// kind is its input request's kind ("" while it asks for none).
	kind string
	// request is that request's segment (the response that shows the
	// call); answeredIn the segment its answer began (-1: not answered).
	request, answeredIn int
	pending             bool
	// answer is the answer as the inputAnswered event has it.
	answer json.RawMessage
	// arguments are the call's arguments, as the model wrote them.
	arguments string
	// mcpIn is the segment whose response shows an own call as an
	// mcp_call (-1: none yet), item that item once the fold made it
	// (foldmcp.go).
	mcpIn int
	item  *item
}

// track folds what the reply's calls and waits are, whichever segment the
// fold shows: a continuation checks the calls it answers against it.
func (r *reply) track(ch view.Change) {
	if _, ok := ch.(view.PromptWaiting); ok {
		r.waits++
		r.afterWait = false
		return
	}
	if r.waits > 0 {
		r.afterWait = true
	}
	switch ch := ch.(type) {
	case view.CallStarted:
		id := ch.Call.GetId()
		if r.calls[id] == nil {
			r.calls[id] = &callState{id: id, name: ch.Call.GetName(), blockID: ch.BlockID, answeredIn: -1, mcpIn: -1}
		}
	case view.CallProgressed:
		r.trackRan(ch.BlockID)
	case view.CallEnded:
		r.trackRan(ch.BlockID)
	case view.InputRequested:
		c := r.calls[ch.Request.GetToolCallId()]
		if c == nil {
			return
		}
		c.kind, c.request, c.pending = ch.Request.GetKind(), r.waits, ch.Request.GetStatus() == "pending"
		if b := r.conv.Block(c.blockID); b != nil && b.Content() != "" {
			c.arguments = b.Content()
		} else if b != nil && b.Input != nil {
			args, _ := json.Marshal(b.Input.AsInterface())
			c.arguments = string(args)
		} else {
			c.arguments = "{}"
		}
		r.callOrder = append(r.callOrder, c.id)
	case view.InputAnswered:
		if c := r.calls[ch.Answer.GetToolCallId()]; c != nil {
			c.pending, c.answeredIn = false, r.waits
			if a := ch.Answer.GetAnswer(); a != nil {
				c.answer, _ = json.Marshal(a.AsMap())
			}
		}
	}
}

// latest is the prompt's newest segment: one per wait that something
// followed.
func (r *reply) latest() int {
	if r.waits > 0 && !r.afterWait {
		return r.waits - 1
	}
	return r.waits
}

// shown reports whether a call asks for input the Responses API shows as
// an item: a client tool's output or a question's answer (a
// function_call), an approval (an mcp_approval_request).
func shown(kind string) bool {
	return kind == "client_tool" || kind == "question" || kind == "approval"
}

// requested shows the call a request asks for, whole: a function_call
// item (added, its arguments as one delta, done), or an
// mcp_approval_request (added, done).
func (r *reply) requested(ch view.InputRequested, emit func(streamEvent)) {
	c := r.calls[ch.Request.GetToolCallId()]
	if c == nil || !shown(c.kind) {
		return
	}
	it := &item{call: c, index: len(r.items), status: statusInProgress}
	r.items = append(r.items, it)
	added := it.output()
	if c.kind == "approval" {
		it.status = statusCompleted
		emit(streamEvent{Type: "response.output_item.added", OutputIndex: ptr(it.index), Item: &added})
		done := it.output()
		emit(streamEvent{Type: "response.output_item.done", OutputIndex: ptr(it.index), Item: &done})
		return
	}
	empty := ""
	added.Arguments = &empty
	emit(streamEvent{Type: "response.output_item.added", OutputIndex: ptr(it.index), Item: &added})
	args := c.arguments
	emit(streamEvent{Type: "response.function_call_arguments.delta", ItemID: it.call.itemID(), OutputIndex: ptr(it.index), Delta: &args})
	emit(streamEvent{Type: "response.function_call_arguments.done", ItemID: it.call.itemID(), OutputIndex: ptr(it.index), Arguments: &args})
	it.status = statusCompleted
	done := it.output()
	emit(streamEvent{Type: "response.output_item.done", OutputIndex: ptr(it.index), Item: &done})
}

// itemID is the call's item id: fc_ (a function_call) or mcpr_ (an
// mcp_approval_request) and the convo tool call's id.
func (c *callState) itemID() string {
	if c.kind == "approval" {
		return "mcpr_" + c.id
	}
	return "fc_" + c.id
}

// callItem is the call as an output item.
func (c *callState) callItem(status string) outputItem {
	args := c.arguments
	if c.kind == "approval" {
		return outputItem{Type: "mcp_approval_request", ID: c.itemID(), Name: c.name, Arguments: &args, ServerLabel: mcpServerLabel}
	}
	return outputItem{Type: "function_call", ID: c.itemID(), CallID: c.id, Name: c.name, Arguments: &args, Status: status}
}

// mcpServerLabel is the server_label of convo's own tools, shown as an
// MCP server's.
const mcpServerLabel = "convo"

// functionCallItem, mcpApprovalItem are the JSON of those items (an
// outputItem of their type marshals as one).
type functionCallItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

type mcpApprovalItem struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	Name        string `json:"name"`
	Arguments   string `json:"arguments"`
	ServerLabel string `json:"server_label"`
}

// toolOutputItem is a function_call_output or mcp_approval_response input
// item, as input_items lists a continuation's.
type toolOutputItem struct {
	Type              string  `json:"type"`
	ID                string  `json:"id"`
	CallID            string  `json:"call_id,omitempty"`
	Output            *string `json:"output,omitempty"`
	Status            string  `json:"status,omitempty"`
	ApprovalRequestID string  `json:"approval_request_id,omitempty"`
	Approve           *bool   `json:"approve,omitempty"`
	Reason            *string `json:"reason,omitempty"`
}

// MarshalJSON writes a message or reasoning item as it is, and a
// function_call or an mcp_approval_request as OpenAI has them (no
// content).
func (o outputItem) MarshalJSON() ([]byte, error) {
	arg := func() string {
		if o.Arguments == nil {
			return ""
		}
		return *o.Arguments
	}
	switch o.Type {
	case "function_call":
		return json.Marshal(functionCallItem{Type: o.Type, ID: o.ID, CallID: o.CallID, Name: o.Name, Arguments: arg(), Status: o.Status})
	case "mcp_approval_request":
		return json.Marshal(mcpApprovalItem{Type: o.Type, ID: o.ID, Name: o.Name, Arguments: arg(), ServerLabel: o.ServerLabel})
	}
	if o.raw != nil {
		return o.raw, nil
	}
	type plain outputItem
	return json.Marshal(plain(o))
}

// answerItem is the call's answer as the input item that gave it: a
// function_call_output (fco_ and the call's id; a question's answer is its
// output) or an mcp_approval_response (mcpra_ and the call's id).
func (c *callState) answerItem() outputItem {
	var a struct {
		Approved *bool   `json:"approved"`
		Reason   *string `json:"reason"`
		Output   *string `json:"output"`
		Error    *string `json:"error"`
		Answer   *string `json:"answer"`
	}
	_ = json.Unmarshal(c.answer, &a)
	var it toolOutputItem
	if c.kind == "approval" {
		approve := a.Approved != nil && *a.Approved
		it = toolOutputItem{Type: "mcp_approval_response", ID: "mcpra_" + c.id, ApprovalRequestID: c.itemID(), Approve: &approve, Reason: a.Reason}
	} else {
		out := ""
		for _, s := range []*string{a.Output, a.Answer, a.Error} {
			if s != nil {
				out = *s
				break
			}
		}
		it = toolOutputItem{Type: "function_call_output", ID: "fco_" + c.id, CallID: c.id, Output: &out, Status: statusCompleted}
	}
	raw, _ := json.Marshal(it)
	return outputItem{Type: it.Type, ID: it.ID, raw: raw}
}
