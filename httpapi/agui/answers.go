package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
	"github.com/convo-dev/convo/wire"
)

// resumeEntry answers an interrupt (RunAgentInput.resume).
type resumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload"`
}

// runAnswer is one answer of a RunAgentInput: a tool message (a frontend
// tool's result) or a resume entry (an interrupt's answer).
type runAnswer struct {
	field      string
	toolCallID string
	tool       *inputMessage // a tool message
	resume     *resumeEntry
}

// runAnswers reads the answers of a RunAgentInput: its resume entries,
// and its tool messages after the last user message.
func runAnswers(in *runInput) ([]runAnswer, error) {
	var out []runAnswer
	for i := len(in.Messages) - 1; i >= 0 && in.Messages[i].Role != "user"; i-- {
		m := &in.Messages[i]
		if m.Role != "tool" {
			continue
		}
		field := fmt.Sprintf("messages[%d]", i)
		if m.ToolCallID == "" {
			return nil, wire.Invalid(field+".toolCallId", "is required in a tool message")
		}
		out = append(out, runAnswer{field: field, toolCallID: m.ToolCallID, tool: m})
	}
	for i := range in.Resume {
		e := &in.Resume[i]
		field := fmt.Sprintf("resume[%d]", i)
		if e.InterruptID == "" {
			return nil, wire.Invalid(field+".interruptId", "is required")
		}
		if e.Status != "resolved" && e.Status != "cancelled" {
			return nil, wire.Invalid(field+".status", "must be resolved or cancelled, got %q", e.Status)
		}
		out = append(out, runAnswer{field: field, toolCallID: e.InterruptID, resume: e})
	}
	return out, nil
}

// inputAnswer is a's answer to a request of kind: a tool message's
// content is a client tool's output (its error field an error), a
// question's answer, or an approval's {"approved", "reason"}; a resume
// entry's payload an approval's {"approved", "reason"} (or a bare
// boolean), a question's answer (a string or {"answer"}), a client tool's
// output (a string or {"output"} or {"error"}). A cancelled resume entry
// denies an approval.
func (a runAnswer) inputAnswer(kind conversation.InputKind) (*convov1.InputAnswer, error) {
	var text string
	var obj struct {
		Approved *bool   `json:"approved"`
		Reason   string  `json:"reason"`
		Answer   *string `json:"answer"`
		Output   *string `json:"output"`
		Error    *string `json:"error"`
	}
	field := a.field + ".payload"
	switch {
	case a.tool != nil:
		field = a.field + ".content"
		if a.tool.Error != nil {
			obj.Error = a.tool.Error
			break
		}
		var err error
		if text, err = messageText(field, a.tool.Content); err != nil {
			return nil, err
		}
		if kind == conversation.InputApproval {
			_ = json.Unmarshal([]byte(text), &obj)
		}
	case a.resume.Status == "cancelled":
		if kind != conversation.InputApproval {
			return nil, wire.Invalid(a.field+".status", "a %s request cannot be cancelled: answer it", kind)
		}
		f := false
		obj.Approved, obj.Reason = &f, "cancelled"
	default:
		p := bytes.TrimSpace(a.resume.Payload)
		var b bool
		switch {
		case json.Unmarshal(p, &text) == nil:
		case json.Unmarshal(p, &b) == nil:
			obj.Approved = &b
		case json.Unmarshal(p, &obj) != nil:
			return nil, wire.Invalid(field, "must be a string, a boolean or an object")
		}
	}
	switch kind {
	case conversation.InputApproval:
		if obj.Approved == nil {
			return nil, wire.Invalid(field, `an approval's answer is {"approved": true|false, "reason": "…"}`)
		}
		return &convov1.InputAnswer{Kind: &convov1.InputAnswer_Approval{Approval: &convov1.ApprovalAnswer{
			Approved: *obj.Approved, Reason: obj.Reason}}}, nil
	case conversation.InputQuestion:
		if obj.Answer != nil {
			text = *obj.Answer
		}
		return &convov1.InputAnswer{Kind: &convov1.InputAnswer_Question{Question: &convov1.QuestionAnswer{Answer: text}}}, nil
	}
	ct := &convov1.ClientToolAnswer{Result: &convov1.ClientToolAnswer_Output{Output: text}}
	switch {
	case obj.Error != nil:
		ct.Result = &convov1.ClientToolAnswer_Error{Error: *obj.Error}
	case obj.Output != nil:
		ct.Result = &convov1.ClientToolAnswer_Output{Output: *obj.Output}
	}
	return &convov1.InputAnswer{Kind: &convov1.InputAnswer_ClientTool{ClientTool: ct}}, nil
}

// answer serves a RunAgentInput that answers the thread's input requests
// (tool messages for frontend tools, resume entries for interrupts) with
// httpx.Server.AnswerInputs: the answers whose requests are pending are
// given together, all or nothing (one refused, naming its field, records
// none), and the response is the resumed run of the answered prompt. An
// answer to a request no longer pending (the first answer won, expired,
// cancelled) is skipped: FailedPrecondition when the input answers no
// pending one, changing nothing.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, owner string, in *runInput) {
	ctx := r.Context()
	id := in.threadID
	// Subscribe before answering, so that no event of the resumed run
	// can be missed.
	sub, snap, replay, err := h.open(ctx, owner, id)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	defer sub.Close()
	st, err := h.srv.Store.State(ctx, owner, id)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	answers := make([]httpx.Answer, len(in.answers))
	for i, a := range in.answers {
		// An interrupt's id and a tool message's toolCallId are convo's
		// tool call ids; one that is not a UUID answers nothing.
		callID, _ := uuid.Parse(a.toolCallID)
		answers[i] = httpx.Answer{Field: a.field, ToolCallID: callID, Read: a.inputAnswer}
	}
	answered, err := h.srv.AnswerInputs(ctx, owner, st.PendingInputs, answers, func(httpx.Answer) error {
		first := in.answers[0]
		return conversation.Errorf(conversation.FailedPrecondition,
			"%s: tool call %q has no pending input request in this thread (answered and acted on already, or none)", first.field, first.toolCallID)
	})
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	promptID := answered[len(answered)-1].PromptID.String()
	runID := in.RunID
	if runID == "" {
		runID = promptID
	}
	h.stream(w, r, sub, newTranslator(id.String(), snap, promptID, runID), replay)
}
