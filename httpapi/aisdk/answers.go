package aisdk

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

// chatAnswer is one answer a useChat request carries in its last
// (assistant) message: a tool part that addToolApprovalResponse set to
// approval-responded, or that addToolOutput set to output-available or
// output-error.
type chatAnswer struct {
	field      string // the part, for errors
	toolCallID string // the part's toolCallId: convo's block id
	approval   *convov1.ApprovalAnswer
	output     *string
	errText    *string
}

// chatToolPart is the fields of a tool part an answer needs.
type chatToolPart struct {
	Type             string          `json:"type"`
	ToolCallID       string          `json:"toolCallId"`
	State            string          `json:"state"`
	ProviderExecuted bool            `json:"providerExecuted"`
	Output           json.RawMessage `json:"output"`
	ErrorText        string          `json:"errorText"`
	Approval         *struct {
		Approved *bool  `json:"approved"`
		Reason   string `json:"reason"`
	} `json:"approval"`
}

// chatAnswers reads the answers of the last message, the assistant's.
// Parts that answer nothing (text, provider-executed tool parts, …) are
// skipped; none answering is Invalid.
func chatAnswers(messages []chatMessage) ([]chatAnswer, error) {
	i := len(messages) - 1
	var out []chatAnswer
	for j, raw := range messages[i].Parts {
		field := fmt.Sprintf("messages[%d].parts[%d]", i, j)
		var p chatToolPart
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, wire.Invalid(field, "is not a message part: %v", err)
		}
		if p.Type != "dynamic-tool" && !strings.HasPrefix(p.Type, "tool-") {
			continue
		}
		a := chatAnswer{field: field, toolCallID: p.ToolCallID}
		switch {
		case p.State == "approval-responded":
			if p.Approval == nil || p.Approval.Approved == nil {
				return nil, wire.Invalid(field+".approval.approved", "is required in an approval-responded part")
			}
			a.approval = &convov1.ApprovalAnswer{Approved: *p.Approval.Approved, Reason: p.Approval.Reason}
		case p.State == "output-available" && !p.ProviderExecuted:
			// A string is the output (or a question's answer) as such;
			// other JSON is its text. A client tool's output is held to
			// convo's rule for accepted JSON by wire.InputAnswerJSON, once
			// the request's kind is known, before any answer is written.
			s := string(p.Output)
			if err := json.Unmarshal(p.Output, &s); err != nil {
				s = string(p.Output)
			}
			a.output = &s
		case p.State == "output-error" && !p.ProviderExecuted:
			a.errText = &p.ErrorText
		default:
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, wire.Invalid(fmt.Sprintf("messages[%d].role", i),
			"the last message must be the user's, or the assistant's answering its input requests (a tool part approval-responded, or a client tool's output-available or output-error); this %q message answers nothing", "assistant")
	}
	return out, nil
}

// inputAnswer is a's answer to a request of kind.
func (a chatAnswer) inputAnswer(kind conversation.InputKind) (*convov1.InputAnswer, error) {
	switch {
	case a.approval != nil:
		return &convov1.InputAnswer{Kind: &convov1.InputAnswer_Approval{Approval: a.approval}}, nil
	case a.errText != nil:
		return &convov1.InputAnswer{Kind: &convov1.InputAnswer_ClientTool{ClientTool: &convov1.ClientToolAnswer{
			Result: &convov1.ClientToolAnswer_Error{Error: *a.errText}}}}, nil
	case kind == conversation.InputQuestion:
		return &convov1.InputAnswer{Kind: &convov1.InputAnswer_Question{Question: &convov1.QuestionAnswer{Answer: *a.output}}}, nil
	}
	return &convov1.InputAnswer{Kind: &convov1.InputAnswer_ClientTool{ClientTool: &convov1.ClientToolAnswer{
		Result: &convov1.ClientToolAnswer_Output{Output: *a.output}}}}, nil
}

// answerTarget is the tool call a tool part names, and its message.
type answerTarget struct {
	callID  uuid.UUID
	message *conversation.Message
}

// answerTargets maps each tool part id (a block id) of st's messages to
// its tool call.
func answerTargets(st *conversation.State) map[string]answerTarget {
	out := map[string]answerTarget{}
	for i := range st.Messages {
		m := &st.Messages[i]
		for _, b := range m.Blocks {
			if tc := b.ToolCall; tc != nil {
				out[b.ID.String()] = answerTarget{callID: tc.ID, message: m}
			}
		}
	}
	return out
}
