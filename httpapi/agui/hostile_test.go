package agui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
	"github.com/convo-dev/convo/internal/jsonlimit/jsonlimittest"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/wire"
)

// TestAGUIHostileAnswers: a RunAgentInput whose answers break convo's rule
// for accepted JSON (numbers out of a float64's range, too deep, \u0000),
// in the body or inside a client tool's output text, is refused 400
// invalid_argument naming the field (an output text as the answer's
// clientTool.output, as every door names it) and the JSONPath, quickly,
// and nothing changes: not even the good answer it carries beside the bad
// one (an approval) is recorded.
func TestAGUIHostileAnswers(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t) // no workers: the test plays the worker
	sent := tb.Send(t, "local", uuid.Nil, "use two tools")
	_, calls, err := pgtest.PauseForInputs(context.Background(), tb.Pool, "w1",
		pgtest.Input{Kind: "approval", Request: `{}`},
		pgtest.Input{Kind: "client_tool", Request: `{"outputSchema": {"type": "array", "items": {"type": "integer"}}}`})
	if err != nil {
		t.Fatal(err)
	}
	approval, tool := calls[0], calls[1]
	deep := strings.Repeat("[", 65) + strings.Repeat("]", 65)
	// input answers the approval (resume[0]) and the client tool with
	// answer (a tool message, messages[1]; or a resume entry, resume[1]).
	input := func(toolMessage any, toolResume any, approvalPayload any) map[string]any {
		in := map[string]any{"threadId": sent.ConversationID.String(), "runId": "run-2",
			"messages":       []any{map[string]any{"id": uuid.NewString(), "role": "user", "content": "use two tools"}},
			"resume":         []any{map[string]any{"interruptId": approval, "status": "resolved", "payload": approvalPayload}},
			"forwardedProps": map[string]any{}}
		if toolMessage != nil {
			in["messages"] = append(in["messages"].([]any), map[string]any{"id": uuid.NewString(), "role": "tool", "toolCallId": tool, "content": toolMessage})
		}
		if toolResume != nil {
			in["resume"] = append(in["resume"].([]any), map[string]any{"interruptId": tool, "status": "resolved", "payload": toolResume})
		}
		return in
	}
	approve := map[string]any{"approved": true}
	for name, tc := range map[string]struct {
		body    string
		message string
	}{
		// The longest output an answer may have (a longer one is refused
		// by its length, before the rule).
		"ToolMessageOfHugeNumbers": {apitest.Marshal(t, input(jsonlimittest.HugeNumbers(wire.MaxInputOutput), nil, approve)),
			"messages[1].clientTool.output: $[0]: number 1e999999 is outside the range of a 64-bit float"},
		"ToolMessageParts": {apitest.Marshal(t, input([]any{map[string]any{"type": "text", "text": "[1, 1e400]"}}, nil, approve)),
			"messages[1].clientTool.output: $[1]: number 1e400 is outside the range"},
		"ResumePayloadText": {apitest.Marshal(t, input(nil, "[1e-400]", approve)),
			"resume[1].clientTool.output: $[0]: number 1e-400 is outside the range"},
		"ResumePayloadOutput": {apitest.Marshal(t, input(nil, map[string]any{"output": deep}, approve)),
			"resume[1].clientTool.output: $" + strings.Repeat("[0]", 64) + ": nested deeper than 64 levels"},
		"NumberInTheBody": {strings.Replace(apitest.Marshal(t, input(`[1]`, nil, map[string]any{"approved": true, "n": "N"})), `"N"`, "1e400", 1),
			"body: $.resume[0].payload.n: number 1e400 is outside the range"},
		"NULInTheOutput": {apitest.Marshal(t, input(`["a\u0000"]`, nil, approve)),
			`messages[1].clientTool.output: $[0]: a string holds \u0000`},
		"NULInTheBody": {apitest.Marshal(t, input(`[1]`, nil, map[string]any{"approved": true, "reason": "a\x00"})),
			`body: $.resume[0].payload.reason: a string holds \u0000`},
		"DeepBody": {apitest.Marshal(t, map[string]any{"threadId": sent.ConversationID.String(), "forwardedProps": json.RawMessage(deep)}),
			"body: $.forwardedProps" + strings.Repeat("[0]", 63) + ": nested deeper than 64 levels"},
	} {
		t.Run(name, func(t *testing.T) {
			before := tb.State(t, "local", sent.ConversationID)
			start := time.Now()
			resp, cancel := apitest.Do(t, "POST", tb.URL+"/v1/agui", http.Header{"Content-Type": {"application/json"}}, strings.NewReader(tc.body))
			defer cancel()
			code, message := apitest.ErrorBody(t, resp)
			// Loose bound, for -race on a loaded machine (the Connect
			// benchmark measures: some 15 ms of CPU a megabyte): before
			// the rule, 100 of these numbers took 6 s to validate, and
			// this is 100,000.
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("refusing took %s", took)
			}
			if resp.StatusCode != http.StatusBadRequest || code != "invalid_argument" || !strings.Contains(message, tc.message) {
				t.Errorf("got %s %s %q, want 400 invalid_argument saying %q", resp.Status, code, message, tc.message)
			}
			after := tb.State(t, "local", sent.ConversationID)
			if after.Seq != before.Seq {
				t.Errorf("the refused input changed the thread (seq %d -> %d)", before.Seq, after.Seq)
			}
			for _, in := range after.PendingInputs {
				if in.Status != conversation.InputPending {
					t.Errorf("request %s (%s) is %s after a refused input", in.ToolCallID, in.Kind, in.Status)
				}
			}
		})
	}
}
