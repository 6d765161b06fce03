package aisdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// TestAISDKRequests checks what the /v1/ai-sdk/ endpoints refuse: each
// refusal is a 4xx with a JSON error naming the problem, and writes
// nothing (no conversation is created, the existing one is unchanged).
func TestAISDKRequests(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	ctx := context.Background()
	alice, mallory := apitest.TokenFor(t, "alice"), apitest.TokenFor(t, "mallory")
	s := tb.Send(t, "alice", uuid.Nil, "hello")
	before := tb.State(t, "alice", s.ConversationID)

	fresh := func() string { return uuid.NewString() }
	withParts := func(parts ...any) map[string]any {
		b := chatBody(fresh(), "submit-message")
		b["messages"] = []any{map[string]any{"id": "u1", "role": "user", "parts": parts}}
		return b
	}
	text := func(s string) any { return map[string]any{"type": "text", "text": s} }
	assistantLast := chatBody(fresh(), "submit-message", "hi")
	assistantLast["messages"] = append(assistantLast["messages"].([]any),
		map[string]any{"id": "a1", "role": "assistant", "parts": []any{text("hello")}})
	// answering is a last message of the assistant's with answered tool
	// parts, in alice's chat.
	answering := func(part map[string]any) map[string]any {
		b := chatBody(s.ConversationID.String(), "submit-message", "hi")
		b["messages"] = append(b["messages"].([]any), map[string]any{"id": s.MessageID.String(), "role": "assistant",
			"parts": []any{map[string]any{"type": "dynamic-tool", "toolName": "send_mail", "toolCallId": uuid.NewString(), "input": map[string]any{}}, part}})
		return b
	}
	noDecision := answering(map[string]any{"type": "dynamic-tool", "toolName": "x", "toolCallId": uuid.NewString(),
		"state": "approval-responded", "input": nil, "approval": map[string]any{"id": "a"}})
	unknownCall := answering(map[string]any{"type": "dynamic-tool", "toolName": "x", "toolCallId": uuid.NewString(),
		"state": "output-available", "input": nil, "output": "42", "providerExecuted": false})
	noTrigger := chatBody(fresh(), "submit-message", "hi")
	delete(noTrigger, "trigger")
	noID := chatBody("", "submit-message", "hi")
	delete(noID, "id")
	edit := chatBody(fresh(), "submit-message", "hi")
	edit["messageId"] = "m1"
	badModel := chatBody(fresh(), "submit-message", "hi")
	badModel["model"] = map[string]any{"temperature": 3}

	for _, tc := range []struct {
		name, token, path string
		body              any
		status            int
		code, message     string
	}{
		{"NoToken", "", "", chatBody(fresh(), "submit-message", "hi"), 401, "unauthenticated", ""},
		{"NotJSON", alice, "", "{", 400, "invalid_argument", "body: is not a useChat request"},
		{"MessagesNotAList", alice, "", map[string]any{"id": fresh(), "messages": map[string]any{"text": "hi"}, "trigger": "submit-message"},
			400, "invalid_argument", "body: is not a useChat request"},
		{"NoID", alice, "", noID, 400, "invalid_argument", "id: is required"},
		{"IDNotAUUID", alice, "", chatBody("chat-1", "submit-message", "hi"), 400, "invalid_argument", `id: "chat-1" is not a UUID`},
		{"NoTrigger", alice, "", noTrigger, 400, "invalid_argument", "trigger: is required"},
		{"UnknownTrigger", alice, "", chatBody(fresh(), "resume-stream", "hi"), 400, "invalid_argument",
			`trigger: "resume-stream" is not a trigger convo knows`},
		{"NoMessages", alice, "", chatBody(fresh(), "submit-message"), 400, "invalid_argument", "messages: is required"},
		{"ApprovalWithoutDecision", alice, "", noDecision, 400, "invalid_argument", "messages[1].parts[1].approval.approved: is required"},
		{"AnswerOfNoRequest", alice, "", unknownCall, 400, "invalid_argument", "messages[1]: answers no input request"},
		{"AnswerInAnotherUsersChat", mallory, "", unknownCall, 404, "not_found", ""},
		{"LastMessageNotTheUsers", alice, "", assistantLast, 400, "invalid_argument", "messages[1].role: the last message must be the user's"},
		{"NoUserText", alice, "", withParts(), 400, "invalid_argument", "messages[0].parts: has no text"},
		{"OnlyWhitespace", alice, "", withParts(text("  ")), 400, "invalid_argument", "messages[0].parts: must not be only whitespace"},
		{"FilePartNotBase64", alice, "", withParts(text("Look:"), map[string]any{"type": "file", "mediaType": "image/png", "url": "data:,"}),
			400, "invalid_argument", `messages[0].parts[1].url: must hold base64 data`},
		{"UnknownPart", alice, "", withParts(text("Look:"), map[string]any{"type": "source-url", "url": "https://example.com"}),
			400, "invalid_argument", `messages[0].parts[1]: convo takes text and file parts, got a "source-url" part`},
		{"MessageOverTheLimit", alice, "", withParts(text(strings.Repeat("x", 100_001))), 400, "invalid_argument",
			"messages[0].parts: is 100001 characters long; the limit is 100000"},
		{"BodyOverTheLimit", alice, "", withParts(text(strings.Repeat("x", 9<<20))), 413, "invalid_argument", "body: is larger than 8388608 bytes (8 MiB)"},
		{"EditNotOfTheLastMessage", alice, "", edit, 400, "invalid_argument", `messageId: "m1" is not the id of the last message`},
		{"ModelOutOfRange", alice, "", badModel, 400, "invalid_argument", "model.temperature"},
		{"AnotherUsersChat", mallory, "", chatBody(s.ConversationID.String(), "submit-message", "hi"), 404, "not_found", ""},
		{"RegenerateAnotherUsersChat", mallory, "", chatBody(s.ConversationID.String(), "regenerate-message"), 404, "not_found", ""},
		{"RegenerateUnknownChat", alice, "", chatBody(fresh(), "regenerate-message"), 404, "not_found", ""},
		{"RegenerateWhileARunning", alice, "", chatBody(s.ConversationID.String(), "regenerate-message"), 409, "failed_precondition",
			"is still being written"},
		{"MessagesOfAnotherUsersChat", mallory, "/" + s.ConversationID.String() + "/messages", nil, 404, "not_found", ""},
		{"StopAnotherUsersChat", mallory, "/" + s.ConversationID.String() + "/stop", "", 404, "not_found", ""},
		{"ResumeNotAUUID", alice, "/x/stream", nil, 400, "invalid_argument", `conversationId: "x" is not a UUID`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			method := "GET"
			switch b := tc.body.(type) {
			case nil:
			case string:
				body, method = []byte(b), "POST"
			default:
				body, _ = json.Marshal(b)
				method = "POST"
			}
			header := http.Header{"Content-Type": {"application/json"}}
			if tc.token != "" {
				header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, cancel := apitest.Do(t, method, tb.URL+"/v1/ai-sdk/chat"+tc.path, header, bytes.NewReader(body))
			defer cancel()
			code, message := apitest.ErrorBody(t, resp)
			if resp.StatusCode != tc.status || code != tc.code || !strings.Contains(message, tc.message) {
				t.Fatalf("%d %s %q; want %d %s containing %q", resp.StatusCode, code, message, tc.status, tc.code, tc.message)
			}
			// A chat id the request named was not created.
			if m, ok := tc.body.(map[string]any); ok {
				if id, err := uuid.Parse(fmt.Sprint(m["id"])); err == nil && id != s.ConversationID {
					for _, owner := range []string{"alice", "mallory"} {
						if _, err := tb.Store.Conversation(ctx, owner, id); conversation.ErrorCode(err) != conversation.NotFound {
							t.Errorf("a refused request created conversation %s for %s (%v)", id, owner, err)
						}
					}
				}
			}
		})
	}
	// useChat resumes on every load, a new chat's too: an unknown chat, or
	// another user's (the two look alike), has no reply running.
	for _, tc := range []struct{ token, chat string }{{alice, uuid.NewString()}, {mallory, s.ConversationID.String()}} {
		resp, cancel := apitest.Do(t, "GET", tb.URL+"/v1/ai-sdk/chat/"+tc.chat+"/stream", apitest.Bearer(tc.token), nil)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("resume of chat %s: %s, want 204", tc.chat, resp.Status)
		}
	}
	resp, cancel := apitest.Do(t, "GET", tb.URL+"/v1/ai-sdk/chat/"+s.ConversationID.String()+"/stream", apitest.Bearer(alice), nil)
	defer cancel()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("resume of alice's chat with a prompt queued: %s, want its stream", resp.Status)
	}
	resp.Body.Close()
	after := tb.State(t, "alice", s.ConversationID)
	if after.Seq != before.Seq || len(after.Messages) != len(before.Messages) {
		t.Errorf("refused requests changed the conversation: seq %d → %d, %d → %d messages", before.Seq, after.Seq,
			len(before.Messages), len(after.Messages))
	}
	if _, err := tb.Store.Conversation(ctx, "mallory", s.ConversationID); conversation.ErrorCode(err) != conversation.NotFound {
		t.Errorf("mallory sees alice's conversation: %v", err)
	}
}

// TestAISDKRegenerate checks regenerate-message: a new prompt answers the
// reply's user message again; the old reply stays as a version of the new
// one (docs/branches.md), off the active path, the model's context and
// /messages.
func TestAISDKRegenerate(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t)
	ctx := context.Background()
	s := tb.Send(t, "local", uuid.Nil, "Tell me a joke")
	tb.StartPrompt(t, s.PromptID)
	tb.AppendText(t, tb.StartBlock(t, s.PromptID, "text", "{}"), "An old joke.")
	tb.CompletePrompt(t, s.PromptID)
	chat := s.ConversationID.String()

	body := chatBody(chat, "regenerate-message", "Tell me a joke")
	body["messageId"] = s.MessageID.String()
	run := openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, body)
	start := run.Next(t)
	st := tb.State(t, "local", s.ConversationID)
	if len(st.Messages) != 2 {
		t.Fatalf("after regenerate: %d messages, want the user's and the new reply", len(st.Messages))
	}
	fresh := st.Messages[1]
	if fresh.SiblingCount != 2 || fresh.SiblingIndex != 1 {
		t.Errorf("the new reply is version %d of %d; want 2 of 2 (the old one kept)", fresh.SiblingIndex+1, fresh.SiblingCount)
	}
	if start["messageId"] != fresh.ID.String() || fresh.Role != conversation.RoleAssistant || fresh.Status != conversation.MessagePending {
		t.Fatalf("start %v; new message %+v", start, fresh)
	}
	// The model sees the user's message, not the reply being replaced.
	rows, err := tb.API.WorkerContextList(ctx, fresh.PromptID.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].MessageID != s.UserMessageID {
		t.Errorf("the new prompt's context: %+v; want only the user's message", rows)
	}
	// A second regenerate while this one runs is refused.
	resp, cancel := apitest.Do(t, "POST", tb.URL+"/v1/ai-sdk/chat", http.Header{"Content-Type": {"application/json"}},
		bytes.NewReader(must(json.Marshal(chatBody(chat, "regenerate-message")))))
	defer cancel()
	if code, msg := apitest.ErrorBody(t, resp); resp.StatusCode != 409 || code != "failed_precondition" {
		t.Errorf("regenerate while running: %d %s %s", resp.StatusCode, code, msg)
	}
	tb.StartPrompt(t, fresh.PromptID.UUID)
	tb.AppendText(t, tb.StartBlock(t, fresh.PromptID.UUID, "text", "{}"), "A new joke.")
	tb.CompletePrompt(t, fresh.PromptID.UUID)
	if got := chunkTypes(run.rest(t)); got != "start-step text-start text-delta text-end finish-step finish [DONE]" {
		t.Fatalf("regenerated reply: %s", got)
	}
	loaded := uiMessagesOf(t, tb.URL, nil, chat)
	if len(loaded) != 2 || loaded[1]["id"] != fresh.ID.String() {
		t.Fatalf("/messages after regenerate: %v; want the user's and the new reply", loaded)
	}

	// An unknown reply is refused; one that is not the latest makes a
	// version of it, and what followed it leaves the path; the latest may
	// be regenerated without naming it.
	next := tb.Send(t, "local", s.ConversationID, "Another")
	tb.StartPrompt(t, next.PromptID)
	tb.CompletePrompt(t, next.PromptID)
	b := chatBody(chat, "regenerate-message")
	b["messageId"] = uuid.NewString()
	resp, cancel = apitest.Do(t, "POST", tb.URL+"/v1/ai-sdk/chat", http.Header{"Content-Type": {"application/json"}},
		bytes.NewReader(must(json.Marshal(b))))
	defer cancel()
	if _, msg := apitest.ErrorBody(t, resp); resp.StatusCode != 404 || !strings.Contains(msg, "is not a message of conversation") {
		t.Errorf("regenerate an unknown reply: %d %q; want 404", resp.StatusCode, msg)
	}
	b["messageId"] = fresh.ID.String()
	older := openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, b)
	older.Next(t)
	st = tb.State(t, "local", s.ConversationID)
	if n := len(st.Messages); n != 2 || st.Messages[1].SiblingCount != 3 || st.Messages[1].Status != conversation.MessagePending {
		t.Fatalf("regenerating a reply that is not the latest: %d messages, %+v; want the user's and a third version", n, st.Messages)
	}
	tb.StartPrompt(t, st.Messages[1].PromptID.UUID)
	tb.CompletePrompt(t, st.Messages[1].PromptID.UUID)
	older.rest(t)
	latest := openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, chatBody(chat, "regenerate-message"))
	latest.Next(t)
	st = tb.State(t, "local", s.ConversationID)
	if n := len(st.Messages); n != 2 || st.Messages[1].Role != conversation.RoleAssistant || st.Messages[1].SiblingCount != 4 {
		t.Fatalf("regenerating the latest reply: %d messages, %+v", n, st.Messages)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestAISDKStreamCutOff checks how a reply's stream ends when it is cut
// off before the reply: on a server shutting down it is aborted (no
// [DONE]: the client sees a dropped connection and resumes elsewhere); a
// deleted conversation ends it with an error chunk.
func TestAISDKStreamCutOff(t *testing.T) {
	t.Parallel()
	t.Run("ServerShutdown", func(t *testing.T) {
		t.Parallel()
		tb := apitest.Setup(t)
		run := openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, chatBody(uuid.NewString(), "submit-message", "hello"))
		run.Next(t)
		tb.StopHub()
		select {
		case <-run.C.Done:
		case <-time.After(apitest.WaitTimeout):
			t.Fatal("the stream did not end")
		}
		if run.C.Err == nil {
			t.Fatal("the response ended cleanly; want it aborted")
		}
		select {
		case ev := <-run.C.Events:
			t.Fatalf("a chunk after the shutdown: %+v", ev)
		default:
		}
	})
	t.Run("ConversationDeleted", func(t *testing.T) {
		t.Parallel()
		tb := apitest.Setup(t)
		chat := uuid.New()
		run := openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, chatBody(chat.String(), "submit-message", "hello"))
		run.Next(t)
		if err := tb.Store.DeleteConversation(context.Background(), "local", chat); err != nil {
			t.Fatal(err)
		}
		rest := run.rest(t)
		if got := chunkTypes(rest); got != "error [DONE]" || rest[0]["errorText"] != "the conversation was deleted" {
			t.Fatalf("after the deletion: %v", rest)
		}
	})
}
