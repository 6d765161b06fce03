package aisdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/wire"
)

// TestAISDKAnswersAllOrNothing answers a reply paused on an approval and
// a question with one useChat request whose approval is good and whose
// question's answer is refused (by the handler: too long; by the store:
// not one of the choices): the request is refused naming the bad part,
// and nothing is recorded (both requests still pending, no event).
// Answering both well then records both.
func TestAISDKAnswersAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := apitest.Setup(t) // no workers: the test plays the worker
	chat := uuid.New()
	post := openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, chatBody(chat.String(), "submit-message", "send a mail"))
	post.Next(t)
	_, _, err := pgtest.PauseForInputs(ctx, tb.Pool, "w1",
		pgtest.Input{Kind: "approval", Request: `{"message": "Send it?"}`},
		pgtest.Input{Kind: "question", Request: `{"question": "Which file?", "choices": ["a.txt", "b.txt"]}`})
	if err != nil {
		t.Fatal(err)
	}
	post.rest(t)
	before := tb.State(t, "local", chat)
	if len(before.PendingInputs) != 2 {
		t.Fatalf("paused with %d requests, want 2", len(before.PendingInputs))
	}

	// answer is the body useChat posts: the loaded messages, with the
	// reply's approval part approved and its question part answered.
	answer := func(output string) (body map[string]any, questionPart int) {
		loaded := uiMessagesOf(t, tb.URL, nil, chat.String())
		messages := normalized(t, loaded).([]any)
		reply := messages[len(messages)-1].(map[string]any)
		var tools []int
		for i, p := range reply["parts"].([]any) {
			if p.(map[string]any)["type"] == "dynamic-tool" {
				tools = append(tools, i)
			}
		}
		if len(tools) != 2 {
			t.Fatalf("the reply has %d tool parts, want 2: %v", len(tools), reply)
		}
		parts := reply["parts"].([]any)
		approval, question := parts[tools[0]].(map[string]any), parts[tools[1]].(map[string]any)
		approval["state"] = "approval-responded"
		approval["approval"].(map[string]any)["approved"] = true
		question["state"], question["output"] = "output-available", output
		return map[string]any{"id": chat.String(), "trigger": "submit-message", "messageId": reply["id"], "messages": messages}, tools[1]
	}
	for _, c := range []struct {
		name, output string
		want         string // in the refusal's message, after the part's field
	}{
		{"HandlerRefuses", strings.Repeat("x", wire.MaxInputOutput+1), ".question.answer"},
		{"StoreRefuses", "c.txt", ": answer_input: answer.answer must be one of the choices"},
	} {
		body, part := answer(c.output)
		want := fmt.Sprintf("messages[1].parts[%d]%s", part, c.want)
		raw, _ := json.Marshal(body)
		resp, cancel := apitest.Do(t, "POST", tb.URL+"/v1/ai-sdk/chat", http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(raw))
		code, msg := apitest.ErrorBody(t, resp)
		cancel()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(msg, want) {
			t.Errorf("%s: %s %s %q, want 400 naming %q", c.name, resp.Status, code, msg, want)
		}
		after := tb.State(t, "local", chat)
		if after.Seq != before.Seq {
			t.Errorf("%s: the refused request wrote events (seq %d -> %d)", c.name, before.Seq, after.Seq)
		}
		for _, in := range after.PendingInputs {
			if in.Status != conversation.InputPending {
				t.Errorf("%s: request %s is %s after a refused request, want pending", c.name, in.ToolCallID, in.Status)
			}
		}
	}

	// Both good: both are recorded (openUI returns with the response's
	// headers: after the answers).
	body, _ := answer("b.txt")
	openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, body)
	for _, in := range tb.State(t, "local", chat).PendingInputs {
		if in.Status != conversation.InputAnswered {
			t.Errorf("request %s is %s after the good request, want answered", in.ToolCallID, in.Status)
		}
	}
}

// TestAISDKQuestionAnswerIsText: a question's answer is plain text, not
// JSON, so an output-available part whose output is text that convo's
// rule for accepted JSON would refuse as JSON (1e400, a list nested 70
// deep) answers its question as it stands, and is recorded as that text.
// (A client tool's output of that text is refused: TestAISDKHostileAnswers.)
func TestAISDKQuestionAnswerIsText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := apitest.Setup(t) // no workers: the test plays the worker
	sent := tb.Send(t, "local", uuid.Nil, "ask me two things")
	question := pgtest.Input{Kind: "question", Request: `{"question": "Which value?"}`}
	_, calls, err := pgtest.PauseForInputs(ctx, tb.Pool, "w1", question, question)
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat("[", 70) + strings.Repeat("]", 70)
	want := map[string]string{calls[0]: "1e400", calls[1]: deep}
	var parts []any
	for i, call := range calls {
		// A tool part's toolCallId is its tool_use block's id.
		var block string
		if err := tb.Pool.QueryRow(ctx, `SELECT block_id::text FROM convo.tool_calls WHERE id = $1`, call).Scan(&block); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, map[string]any{"type": fmt.Sprintf("tool-tool_%d", i), "toolCallId": block,
			"state": "output-available", "input": map[string]any{}, "output": want[call]})
	}
	body, _ := json.Marshal(map[string]any{"id": sent.ConversationID.String(), "trigger": "submit-message", "messages": []any{
		map[string]any{"id": uuid.NewString(), "role": "user", "parts": []any{map[string]any{"type": "text", "text": "ask me two things"}}},
		map[string]any{"id": sent.MessageID.String(), "role": "assistant", "parts": parts},
	}})
	resp, cancel := apitest.Do(t, "POST", tb.URL+"/v1/ai-sdk/chat", http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(body))
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
