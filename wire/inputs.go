package wire

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// Limits of the pause RPCs (AnswerInput, ClaimInput).
const (
	// MaxInputOutput is the longest client tool output or question answer,
	// in characters.
	MaxInputOutput = 100_000
	// MaxClaimant is the longest claimant name, in bytes.
	MaxClaimant = 200
	// DefaultClaimLease and MaxClaimLease bound a client tool's claim.
	DefaultClaimLease = 30 * time.Second
	MaxClaimLease     = 600 * time.Second
)

// InputRequest is r in its wire form (a pending request has no answer).
func InputRequest(r conversation.InputRequest) (*convov1.InputRequest, error) {
	request, err := jsonStruct(r.Request)
	if err != nil {
		return nil, fmt.Errorf("input request %s: request: %w", r.ToolCallID, err)
	}
	out := &convov1.InputRequest{
		ToolCallId: r.ToolCallID.String(), PromptId: r.PromptID.String(), ConversationId: r.ConversationID.String(),
		Kind: string(r.Kind), Request: request, Status: string(r.Status),
		AnsweredAt: tsPtr(r.AnsweredAt), ExpiresAt: tsPtr(r.ExpiresAt),
		ClaimedBy: r.ClaimedBy, ClaimExpiresAt: tsPtr(r.ClaimExpiresAt), CreatedAt: ts(r.CreatedAt),
	}
	if len(r.Answer) > 0 && string(r.Answer) != "null" {
		if out.Answer, err = jsonStruct(r.Answer); err != nil {
			return nil, fmt.Errorf("input request %s: answer: %w", r.ToolCallID, err)
		}
	}
	return out, nil
}

// InputRequests is rs in their wire form (see InputRequest).
func InputRequests(rs []conversation.InputRequest) ([]*convov1.InputRequest, error) {
	var out []*convov1.InputRequest
	for _, r := range rs {
		pr, err := InputRequest(r)
		if err != nil {
			return nil, err
		}
		out = append(out, pr)
	}
	return out, nil
}

// InputAnswerJSON checks an answer and returns it as the JSON object
// convo.answer_input takes: {"approved": bool, "reason": text} (reason
// only when given), {"output": text} or {"error": text}, {"answer": text}.
// The error is Invalid and names the field (field.approval.reason, …); a
// client tool's output that is JSON must follow convo's rule for accepted
// JSON (CheckJSONText), checked after its length. A question's answer is
// text, never held to that rule.
// Whether the answer is of the request's kind, one of a question's
// choices, or of a client tool's outputSchema type, the database checks.
func InputAnswerJSON(field string, a *convov1.InputAnswer) (json.RawMessage, error) {
	var answer map[string]any
	switch k := a.GetKind().(type) {
	case *convov1.InputAnswer_Approval:
		reason := k.Approval.GetReason()
		if err := CheckText(field+".approval.reason", reason, false, MaxComment); err != nil {
			return nil, err
		}
		answer = map[string]any{"approved": k.Approval.GetApproved()}
		if reason != "" {
			answer["reason"] = reason
		}
	case *convov1.InputAnswer_ClientTool:
		switch r := k.ClientTool.GetResult().(type) {
		case *convov1.ClientToolAnswer_Output:
			// The length first (the cheapest), then the rule for accepted
			// JSON (one linear scan): an output schema, and the worker
			// that reads the output, would read it as JSON. This is the
			// door's one check of the rule; the store's schema validation
			// (jsonschema.Validate) applies it again for callers that come
			// by no door, and convo.answer_input in SQL last.
			if err := CheckText(field+".clientTool.output", r.Output, false, MaxInputOutput); err != nil {
				return nil, err
			}
			if err := CheckJSONText(field+".clientTool.output", r.Output); err != nil {
				return nil, err
			}
			answer = map[string]any{"output": r.Output}
		case *convov1.ClientToolAnswer_Error:
			if err := checkVisible(field+".clientTool.error", r.Error, MaxComment); err != nil {
				return nil, err
			}
			answer = map[string]any{"error": r.Error}
		default:
			return nil, Invalid(field+".clientTool", "set output or error")
		}
	case *convov1.InputAnswer_Question:
		if err := checkVisible(field+".question.answer", k.Question.GetAnswer(), MaxInputOutput); err != nil {
			return nil, err
		}
		answer = map[string]any{"answer": k.Question.GetAnswer()}
	default:
		return nil, Invalid(field, "is required: set approval, clientTool or question, the kind of the request")
	}
	return json.Marshal(answer)
}

// checkVisible checks a required text of at most limit characters that
// shows something.
func checkVisible(field, value string, limit int) error {
	if err := CheckText(field, value, true, limit); err != nil {
		return err
	}
	if !HasVisible(value) {
		return Invalid(field, "must not be only whitespace, control, zero-width, bidi control or blank (U+2800, …) characters: it shows nothing")
	}
	return nil
}

// CheckClaimant checks the name of a client that claims a client tool's
// run: required, at most MaxClaimant bytes of UTF-8, no control
// characters. The error is Invalid and names field.
func CheckClaimant(field, claimant string) error {
	if claimant == "" {
		return Invalid(field, "is required: the id of the client (a tab) that runs the tool")
	}
	if len(claimant) > MaxClaimant {
		return Invalid(field, "is %d bytes long; the limit is %d", len(claimant), MaxClaimant)
	}
	if err := CheckText(field, claimant, true, MaxClaimant); err != nil {
		return err
	}
	for i, r := range []rune(claimant) {
		if unicode.Is(unicode.Cc, r) {
			return Invalid(field, "must not contain control characters (U+%04X at character %d)", r, i+1)
		}
	}
	return nil
}

// ClaimLease is the lease a ClaimInput asks for: seconds from 1 to
// MaxClaimLease, 0 meaning DefaultClaimLease. The error is Invalid and
// names field.
func ClaimLease(field string, seconds int32) (time.Duration, error) {
	if seconds == 0 {
		return DefaultClaimLease, nil
	}
	lease := time.Duration(seconds) * time.Second
	if seconds < 0 || lease > MaxClaimLease {
		return 0, Invalid(field, "must be 1 to %d seconds (0: %d), got %d", int(MaxClaimLease.Seconds()), int(DefaultClaimLease.Seconds()), seconds)
	}
	return lease, nil
}
