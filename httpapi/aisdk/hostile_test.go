package aisdk_test

import (
	"context"
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

// TestAISDKHostileAnswers: a useChat request whose tool parts break
// convo's rule for accepted JSON (numbers out of a float64's range, too
// deep, \u0000), as a JSON output or inside an output string, is refused
// 400 invalid_argument naming the field and the JSONPath, quickly, and
// nothing changes: not even the approval it carries beside the bad output
// is recorded.
func TestAISDKHostileAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := apitest.Setup(t) // no workers: the test plays the worker
	sent := tb.Send(t, "local", uuid.Nil, "use two tools")
	_, calls, err := pgtest.PauseForInputs(ctx, tb.Pool, "w1",
		pgtest.Input{Kind: "approval", Request: `{}`},
		pgtest.Input{Kind: "client_tool", Request: `{"outputSchema": {"type": "array", "items": {"type": "integer"}}}`})
	if err != nil {
		t.Fatal(err)
	}
	// A tool part's toolCallId is its tool_use block's id.
	var blocks [2]string
	for i, call := range calls {
		if err := tb.Pool.QueryRow(ctx, `SELECT block_id::text FROM convo.tool_calls WHERE id = $1`, call).Scan(&blocks[i]); err != nil {
			t.Fatal(err)
		}
	}
	deep := strings.Repeat("[", 65) + strings.Repeat("]", 65)
	// body answers the approval and the client tool with output.
	body := func(output any) map[string]any {
		return map[string]any{"id": sent.ConversationID.String(), "trigger": "submit-message", "messages": []any{
			map[string]any{"id": uuid.NewString(), "role": "user", "parts": []any{map[string]any{"type": "text", "text": "use two tools"}}},
			map[string]any{"id": sent.MessageID.String(), "role": "assistant", "parts": []any{
				map[string]any{"type": "tool-tool_0", "toolCallId": blocks[0], "state": "approval-responded",
					"input": map[string]any{}, "approval": map[string]any{"id": calls[0], "approved": true}},
				map[string]any{"type": "tool-tool_1", "toolCallId": blocks[1], "state": "output-available",
					"input": map[string]any{}, "output": output},
			}},
		}}
	}
	for name, tc := range map[string]struct {
		body    string
		message string
	}{
		// About 1 MB as the output's JSON, in the body itself.
		"OutputOfHugeNumbers": {strings.Replace(apitest.Marshal(t, body("OUT")), `"OUT"`, jsonlimittest.HugeNumbers(1_000_000), 1),
			"body: $.messages[1].parts[1].output[0]: number 1e999999 is outside the range of a 64-bit float"},
		// As an output string (JSON text): the longest an answer may have
		// (a longer one is refused by its length, before the rule).
		"OutputTextOfHugeNumbers": {apitest.Marshal(t, body(jsonlimittest.HugeNumbers(wire.MaxInputOutput))),
			"messages[1].parts[1].clientTool.output: $[0]: number 1e999999 is outside the range of a 64-bit float"},
		"OutputTextTooDeep": {apitest.Marshal(t, body(deep)),
			"messages[1].parts[1].clientTool.output: $" + strings.Repeat("[0]", 64) + ": nested deeper than 64 levels"},
		"OutputTextWithNUL": {apitest.Marshal(t, body(`["\u0000"]`)),
			`messages[1].parts[1].clientTool.output: $[0]: a string holds \u0000`},
		"TinyNumberInTheBody": {strings.Replace(apitest.Marshal(t, body("OUT")), `"OUT"`, `[1, 1e-400]`, 1),
			"body: $.messages[1].parts[1].output[1]: number 1e-400 is outside the range"},
		"DeepModel": {strings.Replace(apitest.Marshal(t, map[string]any{"id": sent.ConversationID.String(), "model": "M"}), `"M"`, deep, 1),
			"body: $.model" + strings.Repeat("[0]", 63) + ": nested deeper than 64 levels"},
	} {
		t.Run(name, func(t *testing.T) {
			before := tb.State(t, "local", sent.ConversationID)
			start := time.Now()
			resp, cancel := apitest.Do(t, "POST", tb.URL+"/v1/ai-sdk/chat", http.Header{"Content-Type": {"application/json"}}, strings.NewReader(tc.body))
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
				t.Errorf("the refused request changed the chat (seq %d -> %d)", before.Seq, after.Seq)
			}
			for _, in := range after.PendingInputs {
				if in.Status != conversation.InputPending {
					t.Errorf("request %s (%s) is %s after a refused request", in.ToolCallID, in.Kind, in.Status)
				}
			}
		})
	}
}
