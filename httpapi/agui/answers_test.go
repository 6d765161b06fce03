package agui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
	"github.com/convo-dev/convo/internal/pgtest"
)

// TestAGUIAnswersAllOrNothing answers a run paused on an approval and a
// question with one RunAgentInput whose approval is good and whose
// question's answer is refused (by the handler: a cancelled question;
// by the store: not one of the choices): the input is refused naming the
// bad answer, and nothing is recorded (both requests still pending, no
// event). Answering both well then records both.
func TestAGUIAnswersAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := apitest.Setup(t) // no workers: the test plays the worker
	thread := uuid.NewString()
	first := runInput(thread, "run-1", "send a mail")
	post := openAGUI(t, "POST", tb.URL+"/v1/agui", nil, first)
	post.Next(t)
	_, calls, err := pgtest.PauseForInputs(ctx, tb.Pool, "w1",
		pgtest.Input{Kind: "approval", Request: `{"message": "Send it?"}`},
		pgtest.Input{Kind: "question", Request: `{"question": "Which file?", "choices": ["a.txt", "b.txt"]}`})
	if err != nil {
		t.Fatal(err)
	}
	post.Until(t, "RUN_FINISHED", "RUN_ERROR")
	post.C.Ended(t)
	before := tb.State(t, "local", uuid.MustParse(thread))
	if len(before.PendingInputs) != 2 {
		t.Fatalf("paused with %d requests, want 2", len(before.PendingInputs))
	}

	answer := func(question map[string]any) map[string]any {
		in := runInput(thread, "run-2")
		in["messages"] = []any{first["messages"].([]map[string]any)[0]}
		approval := map[string]any{"interruptId": calls[0], "status": "resolved", "payload": map[string]any{"approved": true}}
		question["interruptId"] = calls[1]
		in["resume"] = []any{approval, question}
		return in
	}
	for _, c := range []struct {
		name     string
		question map[string]any
		want     string // in the refusal's message
	}{
		{"HandlerRefuses", map[string]any{"status": "cancelled"}, "resume[1].status"},
		{"StoreRefuses", map[string]any{"status": "resolved", "payload": "c.txt"}, "resume[1]: answer_input: answer.answer must be one of the choices"},
	} {
		raw, _ := json.Marshal(answer(c.question))
		resp, cancel := apitest.Do(t, "POST", tb.URL+"/v1/agui", http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(raw))
		code, msg := apitest.ErrorBody(t, resp)
		cancel()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %s %s %q, want 400 naming %q", c.name, resp.Status, code, msg, c.want)
		}
		after := tb.State(t, "local", uuid.MustParse(thread))
		if after.Seq != before.Seq {
			t.Errorf("%s: the refused input wrote events (seq %d -> %d)", c.name, before.Seq, after.Seq)
		}
		for _, in := range after.PendingInputs {
			if in.Status != conversation.InputPending {
				t.Errorf("%s: request %s is %s after a refused input, want pending", c.name, in.ToolCallID, in.Status)
			}
		}
	}

	// Both good: both are recorded, and the run resumes.
	// (openAGUI returns with the response's headers: after the answers.)
	openAGUI(t, "POST", tb.URL+"/v1/agui", nil, answer(map[string]any{"status": "resolved", "payload": "b.txt"}))
	for _, in := range tb.State(t, "local", uuid.MustParse(thread)).PendingInputs {
		if in.Status != conversation.InputAnswered {
			t.Errorf("request %s is %s after the good input, want answered", in.ToolCallID, in.Status)
		}
	}
}

// TestAGUIQuestionAnswerIsText: a question's answer is plain text, not
// JSON, so text that convo's rule for accepted JSON would refuse as JSON
// (1e400, a list nested 70 deep) answers a question as it stands, in a
// tool message or in a resume entry (a string or {"answer"}), and is
// recorded as that text. (A client tool's output of that text is refused:
// TestAGUIHostileAnswers.)
func TestAGUIQuestionAnswerIsText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := apitest.Setup(t) // no workers: the test plays the worker
	sent := tb.Send(t, "local", uuid.Nil, "ask me four things")
	question := pgtest.Input{Kind: "question", Request: `{"question": "Which value?"}`}
	_, calls, err := pgtest.PauseForInputs(ctx, tb.Pool, "w1", question, question, question, question)
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat("[", 70) + strings.Repeat("]", 70)
	want := map[string]string{calls[0]: "1e400", calls[1]: deep, calls[2]: "1e400", calls[3]: deep}
	in := runInput(sent.ConversationID.String(), "run-2", "ask me four things")
	in["messages"] = append(in["messages"].([]map[string]any),
		map[string]any{"id": uuid.NewString(), "role": "tool", "toolCallId": calls[0], "content": "1e400"},
		map[string]any{"id": uuid.NewString(), "role": "tool", "toolCallId": calls[1], "content": deep})
	in["resume"] = []any{
		map[string]any{"interruptId": calls[2], "status": "resolved", "payload": "1e400"},
		map[string]any{"interruptId": calls[3], "status": "resolved", "payload": map[string]any{"answer": deep}},
	}
	raw, _ := json.Marshal(in)
	resp, cancel := apitest.Do(t, "POST", tb.URL+"/v1/agui", http.Header{"Content-Type": {"application/json"}, "Accept": {"text/event-stream"}}, bytes.NewReader(raw))
	defer cancel()
	if resp.StatusCode != http.StatusOK {
		code, msg := apitest.ErrorBody(t, resp)
		t.Fatalf("got %s %s %q, want 200 (the questions answered)", resp.Status, code, msg)
	}
	inputs := tb.State(t, "local", sent.ConversationID).PendingInputs
	if len(inputs) != len(want) {
		t.Fatalf("%d requests, want %d", len(inputs), len(want))
	}
	for _, r := range inputs {
		var answer struct{ Answer *string }
		if r.Status != conversation.InputAnswered || json.Unmarshal(r.Answer, &answer) != nil || answer.Answer == nil || *answer.Answer != want[r.ToolCallID.String()] {
			t.Errorf("request %s is %s with answer %.80s, want answered with %.20q…", r.ToolCallID, r.Status, r.Answer, want[r.ToolCallID.String()])
		}
	}
}
