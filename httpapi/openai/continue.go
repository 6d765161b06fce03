package openai

import (
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

// foldSegment folds a prompt's logged events (compacted deltas split
// again) into the response of its segment n (segments.go): segment 0 is
// the response "resp_" and the prompt's id, segment n the continuation
// after its n-th wait, previous_response_id the segment before. A segment
// that has not begun is OpenAI's 404.
func foldSegment(tr conversation.Trace, n int) (*reply, error) {
	h := head(tr.Prompt)
	if n > 0 {
		h.ID = segmentID(tr.Prompt.ID, n)
		prev := segmentID(tr.Prompt.ID, n-1)
		h.PreviousResponseID = &prev
	}
	rep := newReply(h, tr.Prompt.ID.String(), tr.Prompt.MessageID.String())
	rep.segment = n
	for _, e := range tr.Events {
		rep.pending = append(rep.pending, rep.feed(e)...)
	}
	if n > 0 && rep.next == 0 {
		return nil, notFound(segmentID(tr.Prompt.ID, n))
	}
	return rep, nil
}

// segmentCalls are the calls the fold's segment shows (function calls,
// approval requests), in the order they asked.
func (r *reply) segmentCalls() []*callState {
	var out []*callState
	for _, id := range r.callOrder {
		if c := r.calls[id]; c.request == r.segment && shown(c.kind) {
			out = append(out, c)
		}
	}
	return out
}

// checkPrevious checks previous_response_id's response against the
// request: it must have begun; a text input cannot follow a response
// whose calls still wait for their outputs (OpenAI's "No tool output
// found" 400). It returns the response's fold.
func checkPrevious(prev conversation.Trace, req *createRequest) (*reply, error) {
	rep, err := foldSegment(prev, req.previousSegment)
	if err != nil {
		return nil, invalid("previous_response_id", "previous_response_not_found",
			"Previous response with id '"+segmentID(req.previous, req.previousSegment)+"' not found.")
	}
	if req.outputs == nil {
		for _, c := range rep.segmentCalls() {
			if c.pending {
				return nil, invalid("input", "invalid_value", missingOutput(c))
			}
		}
	}
	return rep, nil
}

func missingOutput(c *callState) string {
	if c.kind == "approval" {
		return fmt.Sprintf("No approval response found for approval request %s.", c.itemID())
	}
	return fmt.Sprintf("No tool output found for function call %s.", c.id)
}

// continueReply serves a POST /v1/responses whose input answers the
// calls of the previous response (rep, the fold of trace prev): every
// call it shows still waiting must be answered, by a function_call_output
// (a client tool's output, a question's answer) or an
// mcp_approval_response (an approval), and nothing else; the answers are
// given in one transaction (convo.answer_input each, all or none), and
// the same prompt resumes. The answer is the continuation's response, the
// prompt's next segment, as Create answers (background, stream, or when
// it ends). A refusal (an unknown or repeated call, a missing output, one
// of the wrong type, one answered already) is a 400 naming the item, and
// writes nothing.
func (h *Handler) continueReply(w http.ResponseWriter, r *http.Request, owner string, req *createRequest, prev conversation.Trace, rep *reply) {
	ctx := r.Context()
	calls := map[uuid.UUID]*callState{}
	for _, c := range rep.segmentCalls() {
		calls[uuid.MustParse(c.id)] = c
	}
	given := map[uuid.UUID]string{}
	var answers []conversation.AnswerInputParams
	for _, o := range req.outputs {
		c := calls[o.callID]
		if c == nil {
			if o.approval {
				h.writeError(w, r, invalid(o.field+".approval_request_id", "invalid_value", noApprovalFound("mcpr_"+o.callID.String())))
			} else {
				h.writeError(w, r, invalid(o.field+".call_id", "invalid_value", noCallFound(o.callID.String())))
			}
			return
		}
		if first, dup := given[o.callID]; dup {
			h.writeError(w, r, invalid(o.field, "duplicate_value", fmt.Sprintf("%s answers %s again (%s did).", o.field, c.itemID(), first)))
			return
		}
		given[o.callID] = o.field
		if o.approval != (c.kind == "approval") {
			want := "a function_call_output (call_id " + c.id + ")"
			if c.kind == "approval" {
				want = "an mcp_approval_response (approval_request_id " + c.itemID() + ")"
			}
			h.writeError(w, r, invalid(o.field, "invalid_value", fmt.Sprintf("%s answers %s with the wrong item: it takes %s.", o.field, c.itemID(), want)))
			return
		}
		if !c.pending {
			h.writeError(w, r, invalid(o.field, "invalid_value", fmt.Sprintf(
				"%s answers %s, which no longer waits (answered already, expired or cancelled).", o.field, c.itemID())))
			return
		}
		answer, err := wire.InputAnswerJSON(o.field, inputAnswer(c.kind, o))
		if err != nil {
			h.writeError(w, r, invalid(o.field, "invalid_value", err.Error()))
			return
		}
		answers = append(answers, conversation.AnswerInputParams{OwnerID: owner, ToolCallID: o.callID, Answer: answer, Field: o.field})
	}
	for _, c := range rep.segmentCalls() {
		if _, ok := given[uuid.MustParse(c.id)]; c.pending && !ok {
			h.writeError(w, r, invalid("input", "invalid_value", missingOutput(c)))
			return
		}
	}
	sub, err := h.subscribe(ctx, req, owner, prev.Prompt.ConversationID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if sub != nil {
		defer sub.Close()
	}
	if _, err := h.srv.Store.AnswerInputs(ctx, answers); err != nil {
		h.writeError(w, r, err)
		return
	}
	tr, err := h.trace(ctx, owner, prev.Prompt.ID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	next, err := foldSegment(tr, req.previousSegment+1)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.respond(w, r, req, sub, tr, next)
}

// inputAnswer is o as the answer to a request of kind: a client tool's
// output, a question's answer, an approval.
func inputAnswer(kind string, o toolOutput) *convov1.InputAnswer {
	switch kind {
	case "approval":
		return &convov1.InputAnswer{Kind: &convov1.InputAnswer_Approval{Approval: &convov1.ApprovalAnswer{Approved: o.approve, Reason: o.reason}}}
	case "question":
		return &convov1.InputAnswer{Kind: &convov1.InputAnswer_Question{Question: &convov1.QuestionAnswer{Answer: o.output}}}
	}
	return &convov1.InputAnswer{Kind: &convov1.InputAnswer_ClientTool{ClientTool: &convov1.ClientToolAnswer{
		Result: &convov1.ClientToolAnswer_Output{Output: o.output}}}}
}

// continuationInputItems serves input_items of a continuation (segment
// seg of promptID): the answers that resumed the reply, as the request
// gave them: function_call_output and mcp_approval_response items (fco_
// and mcpr_ and the tool call's id), in the order the calls asked.
func (h *Handler) continuationInputItems(w http.ResponseWriter, r *http.Request, owner string, promptID uuid.UUID, seg int) {
	tr, err := h.trace(r.Context(), owner, promptID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	rep, err := foldSegment(tr, seg)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	items := []outputItem{}
	for _, id := range rep.callOrder {
		c := rep.calls[id]
		if c.answeredIn != seg || c.request != seg-1 || !shown(c.kind) {
			continue
		}
		items = append(items, c.answerItem())
	}
	list, err := page(items, r.URL.Query())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, list)
}
