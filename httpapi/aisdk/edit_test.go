package aisdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// uiUser is a user message as useChat posts it.
func uiUser(id, text string) map[string]any {
	return map[string]any{"id": id, "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}
}

// uiAssistant is an assistant message as useChat holds it (convo's id).
func uiAssistant(id uuid.UUID, text string) map[string]any {
	return map[string]any{"id": id.String(), "role": "assistant", "parts": []any{map[string]any{"type": "text", "text": text}}}
}

// editBody is useChat's edit: the chat up to the edited message, which
// comes last with messageId its id.
func editBody(chat uuid.UUID, messages ...map[string]any) map[string]any {
	list := make([]any, len(messages))
	for i, m := range messages {
		list[i] = m
	}
	return map[string]any{"id": chat.String(), "messages": list, "trigger": "submit-message", "messageId": messages[len(messages)-1]["id"]}
}

// postRefused posts body to the chat endpoint and checks the refusal.
func postRefused(t *testing.T, tb *apitest.Bundle, body any, status int, code, message string) {
	t.Helper()
	resp, cancel := apitest.Do(t, "POST", tb.URL+"/v1/ai-sdk/chat", http.Header{"Content-Type": {"application/json"}},
		bytes.NewReader(must(json.Marshal(body))))
	defer cancel()
	gotCode, gotMessage := apitest.ErrorBody(t, resp)
	if resp.StatusCode != status || gotCode != code || !strings.Contains(gotMessage, message) {
		t.Fatalf("%d %s %q; want %d %s containing %q", resp.StatusCode, gotCode, gotMessage, status, code, message)
	}
}

// TestAISDKEdit checks how useChat's edit (sendMessage with a messageId)
// maps onto EditMessage: by convo's id (a chat loaded from /messages), by
// the message before it (a message sent since the page loaded keeps the
// client's id), the chat's first message; the model's context of the new
// reply; and what is refused, changing nothing: an edit while a reply is
// being written (409, as EditMessage refuses it), one whose message
// before the edited one is not on the chat's active path (409). A message
// convo never got, after the chat's latest, is sent as a new message.
func TestAISDKEdit(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t)
	ctx := context.Background()
	complete := func(prompt uuid.UUID, text string) {
		tb.StartPrompt(t, prompt)
		tb.AppendText(t, tb.StartBlock(t, prompt, "text", "{}"), text)
		tb.CompletePrompt(t, prompt)
	}
	first := tb.Send(t, "local", uuid.Nil, "What is 6*7?")
	chat := first.ConversationID
	complete(first.PromptID, "42")
	second := tb.Send(t, "local", chat, "And 7*8?")
	complete(second.PromptID, "56")

	// By convo's id: the second message, as /messages served it.
	run := openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, editBody(chat,
		uiUser(first.UserMessageID.String(), "What is 6*7?"), uiAssistant(first.MessageID, "42"),
		uiUser(second.UserMessageID.String(), "And 8*9?")))
	start := run.Next(t)
	st := tb.State(t, "local", chat)
	if len(st.Messages) != 4 || st.Messages[2].ID == second.UserMessageID || st.Messages[2].Blocks[0].Content != "And 8*9?" ||
		st.Messages[2].SiblingCount != 2 || st.Messages[2].SiblingIndex != 1 || start["messageId"] != st.Messages[3].ID.String() {
		t.Fatalf("edit by convo's id: start %v; path %+v", start, st.Messages)
	}
	edited := st.Messages[3]
	// The model sees the first turn and the new text, not the old one.
	rows, err := tb.API.WorkerContextList(ctx, edited.PromptID.UUID)
	if err != nil {
		t.Fatal(err)
	}
	var shown []uuid.UUID
	for _, r := range rows {
		shown = append(shown, r.MessageID)
	}
	if want := []uuid.UUID{first.UserMessageID, first.MessageID, st.Messages[2].ID}; !slices.Equal(shown, want) {
		t.Errorf("the edit's context %v; want %v", shown, want)
	}

	// While its reply is being written, another edit is refused, as
	// EditMessage refuses it, and changes nothing.
	busy := editBody(chat, uiUser("c1", "What is 5*5?"))
	postRefused(t, tb, busy, 409, "failed_precondition", "is still being written")
	complete(edited.PromptID.UUID, "72")
	if got := run.rest(t); chunkTypes(got) != "start-step text-start text-delta text-end finish-step finish [DONE]" {
		t.Fatalf("the edit's reply: %s", chunkTypes(got))
	}

	// A message before the edited one that is not on the path (the old
	// reply of the second turn's first version, say: the chat changed
	// since the client loaded it) is refused.
	stale := editBody(chat, uiUser("c1", "What is 6*7?"), uiAssistant(first.MessageID, "42"), uiUser("c2", "And 7*8?"),
		uiAssistant(second.MessageID, "56"), uiUser("c3", "And then?"))
	before := tb.State(t, "local", chat)
	postRefused(t, tb, stale, 409, "failed_precondition", `messages[3]: message "`+second.MessageID.String()+`", before the edited message, is not on the chat's active path`)
	if after := tb.State(t, "local", chat); after.Seq != before.Seq {
		t.Errorf("a refused edit changed the chat: seq %d → %d", before.Seq, after.Seq)
	}

	// The client's own id, the chat's first message: its first turn.
	run = openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, editBody(chat, uiUser("c1", "What is 2*3?")))
	run.Next(t)
	st = tb.State(t, "local", chat)
	if len(st.Messages) != 2 || st.Messages[0].Blocks[0].Content != "What is 2*3?" || st.Messages[0].SiblingCount != 2 {
		t.Fatalf("edit of the first message: path %+v", st.Messages)
	}
	complete(st.Messages[1].PromptID.UUID, "6")
	run.rest(t)

	// A message the chat never got, after its latest (sendMessage() posts
	// it again after a failed request): a new message.
	run = openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, editBody(chat, uiUser("c1", "What is 2*3?"),
		uiAssistant(st.Messages[1].ID, "6"), uiUser("c4", "And 3*4?")))
	run.Next(t)
	st = tb.State(t, "local", chat)
	if len(st.Messages) != 4 || st.Messages[2].Blocks[0].Content != "And 3*4?" || st.Messages[2].SiblingCount != 1 ||
		st.Messages[3].Status != conversation.MessagePending {
		t.Fatalf("a message convo never got: path %+v", st.Messages)
	}
}
