package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// TestAnswerInputsAllOrNothing answers two requests of a waiting prompt
// at once: with the second answer refused (not one of the question's
// choices; then a client tool's output not of its schema, refused before
// the transaction), nothing changes and the error names the second
// answer's field; with both good, both are answered and the prompt is
// queued again.
func TestAnswerInputsAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.startReply(t)
	approval := tb.toolCall(t, r.promptID, "delete_file")
	tb.requestInput(t, approval, "approval", `{}`)
	question := tb.toolCall(t, r.promptID, "pick")
	tb.requestInput(t, question, "question", `{"question": "Which?", "choices": ["a", "b"]}`)
	tool := tb.toolCall(t, r.promptID, "count")
	tb.requestInput(t, tool, "client_tool", `{"outputSchema": {"type": "array", "items": {"type": "integer"}}}`)
	if parked, err := tb.api.PromptWait(ctx, apiq.PromptWaitParams{PromptID: r.promptID, Worker: "w1"}); err != nil || !parked {
		t.Fatalf("wait_prompt = %v, %v", parked, err)
	}
	params := func(toolOutput, questionAnswer string) []conversation.AnswerInputParams {
		out, _ := json.Marshal(map[string]string{"output": toolOutput})
		ans, _ := json.Marshal(map[string]string{"answer": questionAnswer})
		return []conversation.AnswerInputParams{
			{OwnerID: "local", ToolCallID: approval, Answer: json.RawMessage(`{"approved": true}`), Field: "first"},
			{OwnerID: "local", ToolCallID: tool, Answer: out, Field: "second"},
			{OwnerID: "local", ToolCallID: question, Answer: ans, Field: "third"},
		}
	}
	before := tb.fingerprint(t)
	for _, c := range []struct {
		name, output, answer, want string
	}{
		{"StoreRefuses", "[1, 2]", "c", "third: answer_input: answer.answer must be one of the choices"},
		{"SchemaRefuses", `["x"]`, "a", "second: answer.output: does not match"},
	} {
		_, err := tb.store.AnswerInputs(ctx, params(c.output, c.answer))
		if conversation.ErrorCode(err) != conversation.Invalid || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want Invalid starting %q", c.name, err, c.want)
		}
		if after := tb.fingerprint(t); after != before {
			t.Errorf("%s: the refused answers changed\n%s\nto\n%s", c.name, before, after)
		}
	}

	got, err := tb.store.AnswerInputs(ctx, params("[1, 2]", "b"))
	if err != nil {
		t.Fatal(err)
	}
	want := []uuid.UUID{approval, tool, question}
	for i, in := range got {
		if in.ToolCallID != want[i] || in.Status != conversation.InputAnswered {
			t.Errorf("answer %d: %s %s, want %s answered", i, in.ToolCallID, in.Status, want[i])
		}
	}
	if p := tb.promptRow(t, r.promptID); p.Status != "queued" || p.Waiting {
		t.Errorf("the prompt after all its answers: %+v, want queued again", p)
	}
}
