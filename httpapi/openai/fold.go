package openai

import (
	"encoding/json"
	"strings"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire/view"
)

// reply folds one prompt's events into its Response and the events of
// its stream. It sees only the prompt's own events (those whose prompt_id
// is the prompt's), in log order, each once: the events it makes, and
// their sequence numbers, depend on nothing else, so a replay from the
// log makes the live stream's events again, number for number.
//
// The mapping: the prompt queued makes response.created (the first event,
// 0) and response.queued; started, response.in_progress; a text block is
// a message item with one output_text part, a reasoning block a reasoning
// item with one reasoning_text part: the block's start makes
// output_item.added and content_part.added, each delta an
// output_text.delta (reasoning_text.delta), its end the .done events of
// the text, the part and the item. A tool call is a function_call, an
// mcp_approval_request (foldtools.go) or an mcp_call (foldmcp.go); other
// blocks (tool_result, which repeats its call's output, structured output,
// files, worker-defined types) are not shown. The prompt's end closes the items
// still open (status incomplete), then makes response.completed,
// response.failed (with the prompt's error), or, cancelled,
// response.incomplete with status cancelled (the SDKs know no event of
// their own for it).
type reply struct {
	head     response
	promptID string
	conv     *view.Conversation
	// items are the output items in the order they started (output_index).
	items   []*item
	byBlock map[string]*item
	// next is the sequence number of the next event.
	next  int64
	ended bool
	// pending are the events foldTrace made, for a stream to send.
	pending []any

	// segment is the segment of the prompt the fold shows (segments.go):
	// the events of the others fold the state only. at is the segment
	// the fold has reached.
	segment, at int
	// calls are the prompt's tool calls by id, callOrder those that
	// asked for input in the order they asked; waits counts the
	// prompt's waits, afterWait whether anything followed the last
	// (foldtools.go).
	calls     map[string]*callState
	callOrder []string
	waits     int
	afterWait bool
}

// item is one output item: a block shown.
type item struct {
	block    *view.Block
	call     *callState // a call's item (foldtools.go), block nil but for an mcp_call
	mcp      bool       // an own tool's mcp_call item (foldmcp.go): block is its tool_use block
	itemType string     // "message" or "reasoning"
	partType string     // "output_text" or "reasoning_text"
	id       string
	index    int
	status   string
}

// newReply returns the fold of the prompt filling message messageID,
// whose Response starts as head (id, model, request fields).
func newReply(head response, promptID, messageID string) *reply {
	conv := view.New(&convov1.Snapshot{Messages: []*convov1.Message{
		{Id: messageID, Role: "assistant", Status: "pending", PromptId: promptID},
	}})
	head.Object = "response"
	head.Status = statusQueued
	head.Output = []outputItem{}
	return &reply{head: head, promptID: promptID, conv: conv, byBlock: map[string]*item{}, calls: map[string]*callState{}}
}

// apply folds one of the prompt's events and returns the stream events
// it makes, numbered.
func (r *reply) apply(ev *convov1.Event) []any {
	var out []any
	emit := func(e streamEvent) {
		if r.next == 0 && e.Type != "response.created" {
			r.emitCreated(&out)
		}
		e.SequenceNumber = r.next
		r.next++
		out = append(out, e)
	}
	for _, ch := range r.conv.Read(ev) {
		if ch.Prompt() != r.promptID {
			continue
		}
		r.conv.Apply(ch)
		r.track(ch)
		if r.ended {
			continue
		}
		if r.at < r.segment {
			// An earlier segment's: its state only.
			if _, ok := ch.(view.PromptWaiting); ok {
				r.at++
			}
			continue
		}
		if r.next == 0 && r.segment > 0 {
			// A continuation begins with the first event after the
			// wait (an answer): created then, queued until a worker
			// takes the prompt again.
			r.head.CreatedAt = ch.Time().Unix()
			r.emitCreated(&out)
			emit(streamEvent{Type: "response.queued", Response: r.snapshot()})
		}
		switch ch := ch.(type) {
		case view.PromptQueued:
			r.head.Status = statusQueued
			if r.next == 0 {
				r.emitCreated(&out)
			}
			emit(streamEvent{Type: "response.queued", Response: r.snapshot()})
		case view.PromptStarted:
			r.head.Status = statusInProgress
			emit(streamEvent{Type: "response.in_progress", Response: r.snapshot()})
		case view.BlockStarted:
			b := r.conv.Block(ch.BlockID)
			if b == nil || r.byBlock[ch.BlockID] != nil {
				continue
			}
			it := &item{block: b, index: len(r.items), status: statusInProgress}
			switch b.Kind {
			case view.Text:
				it.itemType, it.partType, it.id = "message", "output_text", "msg_"+b.ID
			case view.Reasoning:
				it.itemType, it.partType, it.id = "reasoning", "reasoning_text", "rs_"+b.ID
			default:
				continue // not shown yet (docs/openai.md)
			}
			r.items = append(r.items, it)
			r.byBlock[b.ID] = it
			added := it.output()
			added.Content = []contentPart{}
			emit(streamEvent{Type: "response.output_item.added", OutputIndex: ptr(it.index), Item: &added})
			part := it.part("")
			emit(streamEvent{Type: "response.content_part.added", ItemID: it.id, OutputIndex: ptr(it.index),
				ContentIndex: ptr(0), Part: &part})
		case view.BlockAppended:
			it := r.byBlock[ch.BlockID]
			if it == nil || it.status != statusInProgress {
				continue
			}
			delta := ch.Delta
			e := streamEvent{Type: "response." + it.partType + ".delta", ItemID: it.id, OutputIndex: ptr(it.index),
				ContentIndex: ptr(0), Delta: &delta}
			if it.partType == "output_text" {
				e.Logprobs = &[]string{}
			}
			emit(e)
		case view.BlockEnded:
			if it := r.byBlock[ch.BlockID]; it != nil && it.status == statusInProgress {
				r.close(it, statusCompleted, emit)
			}
		case view.CallProgressed:
			r.ran(ch.BlockID, false, false, emit)
		case view.CallEnded:
			r.ran(ch.BlockID, true, ch.Failed, emit)
		case view.InputRequested:
			r.requested(ch, emit)
		case view.PromptWaiting:
			// The prompt waits for its calls' outputs (or approvals): the
			// response ends with them, completed, as OpenAI's does.
			for _, it := range r.items {
				if it.status == statusInProgress {
					r.close(it, statusIncomplete, emit)
				}
			}
			r.head.Status = statusCompleted
			r.ended = true
			emit(streamEvent{Type: "response.completed", Response: r.snapshot()})
		case view.PromptEnded:
			status, typ := statusCompleted, "response.completed"
			switch ch.Outcome {
			case view.Failed:
				status, typ = statusFailed, "response.failed"
				msg := ch.Error
				if msg == "" {
					msg = "the reply failed"
				}
				r.head.Error = &responseError{Code: "server_error", Message: msg}
			case view.Cancelled:
				status, typ = statusCancelled, "response.incomplete"
			}
			for _, it := range r.items {
				if it.status == statusInProgress {
					r.close(it, statusIncomplete, emit)
				}
			}
			r.head.Status = status
			r.ended = true
			emit(streamEvent{Type: typ, Response: r.snapshot()})
		}
	}
	return out
}

// emitCreated makes response.created, number 0.
func (r *reply) emitCreated(out *[]any) {
	*out = append(*out, streamEvent{Type: "response.created", SequenceNumber: 0, Response: r.snapshot()})
	r.next = 1
}

// close makes the .done events of an item whose block ended (status
// completed) or whose prompt ended first (incomplete).
func (r *reply) close(it *item, status string, emit func(streamEvent)) {
	if it.mcp {
		r.closeCall(it, status, emit)
		return
	}
	text := it.block.Content()
	e := streamEvent{Type: "response." + it.partType + ".done", ItemID: it.id, OutputIndex: ptr(it.index),
		ContentIndex: ptr(0), Text: &text}
	if it.partType == "output_text" {
		e.Logprobs = &[]string{}
	}
	emit(e)
	part := it.part(text)
	emit(streamEvent{Type: "response.content_part.done", ItemID: it.id, OutputIndex: ptr(it.index),
		ContentIndex: ptr(0), Part: &part})
	it.status = status
	done := it.output()
	emit(streamEvent{Type: "response.output_item.done", OutputIndex: ptr(it.index), Item: &done})
}

// part is the item's content part with text.
func (it *item) part(text string) contentPart {
	p := contentPart{Type: it.partType, Text: text}
	if it.partType == "output_text" {
		p.Annotations, p.Logprobs = &[]json.RawMessage{}, &[]json.RawMessage{}
	}
	return p
}

// output is the item as it stands.
func (it *item) output() outputItem {
	if it.mcp {
		return it.mcpItem(true)
	}
	if it.call != nil {
		return it.call.callItem(it.status)
	}
	o := outputItem{Type: it.itemType, ID: it.id, Status: it.status, Content: []contentPart{it.part(it.block.Content())}}
	if it.itemType == "message" {
		o.Role = "assistant"
	} else {
		o.Summary = &[]string{}
	}
	return o
}

// snapshot is the Response as it stands.
func (r *reply) snapshot() *response {
	resp := r.head
	resp.Output = make([]outputItem, 0, len(r.items))
	var text strings.Builder
	for _, it := range r.items {
		o := it.output()
		resp.Output = append(resp.Output, o)
		if it.partType == "output_text" {
			text.WriteString(it.block.Content())
		}
	}
	resp.OutputText = text.String()
	return &resp
}

func ptr[T any](v T) *T { return &v }
