package aisdk_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// uiStream reads an AI SDK UI message stream, keeping each chunk as sent
// for the verifier; Next returns "[DONE]" as {"type": "[DONE]"}.
type uiStream struct{ *apitest.JSONStream }

func openUI(t testing.TB, method, url string, header http.Header, body any) *uiStream {
	t.Helper()
	u := &uiStream{apitest.OpenJSONStream(t, method, url, header, body, "[DONE]")}
	if got := u.C.Resp.Header.Get("X-Vercel-AI-UI-Message-Stream"); got != "v1" {
		t.Fatalf("x-vercel-ai-ui-message-stream = %q, want v1", got)
	}
	if ct := u.C.Resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	return u
}

// rest reads every chunk to [DONE] and checks that the body ends there.
func (u *uiStream) rest(t testing.TB) []map[string]any {
	t.Helper()
	out := u.Until(t, "[DONE]")
	u.C.Ended(t)
	return out
}

func (u *uiStream) save(t testing.TB, dir, name string) {
	t.Helper()
	var b strings.Builder
	for _, d := range u.Raw {
		fmt.Fprintf(&b, "data: %s\n\n", d)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".sse"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func chunkTypes(chunks []map[string]any) string {
	var out []string
	for _, c := range chunks {
		out = append(out, c["type"].(string))
	}
	return strings.Join(out, " ")
}

// chatBody is what DefaultChatTransport posts for one user message.
func chatBody(chatID, trigger string, texts ...string) map[string]any {
	messages := []any{}
	for _, text := range texts {
		messages = append(messages, map[string]any{"id": uuid.NewString(), "role": "user",
			"parts": []any{map[string]any{"type": "text", "text": text}}})
	}
	return map[string]any{"id": chatID, "messages": messages, "trigger": trigger}
}

// uiSummary is a UIMessage's parts as "kind:content" lines, steps left
// out, for comparing with what GetConversation holds.
func uiSummary(parts []any) []string {
	var out []string
	for _, p := range parts {
		part := p.(map[string]any)
		switch typ := part["type"].(string); {
		case typ == "text" || typ == "reasoning":
			out = append(out, typ+":"+part["text"].(string))
		case typ == "dynamic-tool":
			line := fmt.Sprint("tool:", part["toolName"], ":", part["state"])
			if o, ok := part["output"]; ok {
				line += ":" + o.(string)
			}
			if e, ok := part["errorText"]; ok {
				line += ":" + e.(string)
			}
			out = append(out, line)
		case strings.HasPrefix(typ, "data-"):
			b, _ := json.Marshal(part["data"])
			out = append(out, typ+":"+string(b))
		}
	}
	return out
}

// stateSummary is the same list made from a message as the store holds
// it: text and reasoning blocks with their text, tool_use blocks with
// their call's name, state and output or error (tool_result blocks repeat
// the output), structured blocks with their JSON, blocks of other types
// with their content and metadata.
func stateSummary(m conversation.Message) []string {
	var out []string
	for _, b := range m.Blocks {
		switch b.Type {
		case "text", "reasoning":
			out = append(out, b.Type+":"+b.Content)
		case "tool_use":
			tc := b.ToolCall
			switch {
			case tc == nil:
				out = append(out, "tool:unknown:input-available")
			case tc.Status == conversation.ToolCallCompleted:
				out = append(out, "tool:"+tc.Name+":output-available:"+tc.Output)
			case tc.Status == conversation.ToolCallFailed:
				out = append(out, "tool:"+tc.Name+":output-error:"+tc.Error)
			default:
				out = append(out, "tool:"+tc.Name+":input-available")
			}
		case "structured":
			var v any
			_ = json.Unmarshal([]byte(b.Content), &v)
			j, _ := json.Marshal(v)
			out = append(out, "data-structured:"+string(j))
		case "tool_result":
		default: // a block type the protocol has no part for
			d := map[string]any{"content": b.Content}
			var meta map[string]any
			if json.Unmarshal(b.Metadata, &meta) == nil && len(meta) > 0 {
				d["metadata"] = meta
			}
			j, _ := json.Marshal(d)
			out = append(out, "data-"+b.Type+":"+string(j))
		}
	}
	return out
}

// uiMessagesOf reads GET /v1/ai-sdk/chat/{id}/messages.
func uiMessagesOf(t testing.TB, base string, header http.Header, chatID string) []map[string]any {
	t.Helper()
	resp, cancel := apitest.Do(t, "GET", fmt.Sprintf("%s/v1/ai-sdk/chat/%s/messages", base, chatID), header, nil)
	defer cancel()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("messages: %s", resp.Status)
	}
	var out []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// normalized is v after a JSON round trip, for comparing JSON documents.
func normalized(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

type verifierReport struct {
	Recordings []struct {
		File         string         `json:"file"`
		Chunks       int            `json:"chunks"`
		SchemaErrors []string       `json:"schemaErrors"`
		ReadError    *string        `json:"readError"`
		StreamErrors []string       `json:"streamErrors"`
		Message      map[string]any `json:"message"`
	} `json:"recordings"`
	Transport *struct {
		ChatID        string         `json:"chatId"`
		Complete      *foldedMessage `json:"complete"`
		Resumed       *foldedMessage `json:"resumed"`
		IdleReconnect string         `json:"idleReconnect"`
		Error         *string        `json:"error"`
	} `json:"transport"`
	Chats *struct {
		Whole   *chatRun `json:"whole"`
		LastTwo *chatRun `json:"lastTwo"`
	} `json:"chats"`
}

type foldedMessage struct {
	Message      map[string]any `json:"message"`
	StreamErrors []string       `json:"streamErrors"`
}

// TestAISDKVerifier records UI message streams of every kind (a complete
// demo reply with reasoning, a tool call and markdown text; a cancelled
// reply; a failed one; a late join through the resume endpoint; blocks
// the protocol has no part for), checks their chunks, and has the AI SDK's
// own code judge them: every chunk passes uiMessageChunkSchema, and the
// stream reader folds each into a UIMessage equal to what GET
// /v1/ai-sdk/chat/{id}/messages serves and to what the store holds; an
// edited chat's and a regenerated one's new replies among them. Then
// DefaultChatTransport itself runs against this server: a send, a send
// whose response is dropped and resumed (the reply goes on, and the
// resumed stream carries all of it), an idle reconnect (204: null); and
// the AI SDK's chat (what useChat wraps) sends, edits, regenerates and
// reloads, its messages equal to /messages after every step.
func TestAISDKVerifier(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The demo model at a pace at which a reply outlives a dropped
	// response long enough to be resumed.
	demo := apitest.Setup(t, apitest.Options{Workers: true, DemoPace: 150})
	manual := apitest.Setup(t) // no workers: the test writes the replies
	// The demo model at full speed, for the AI SDK's chat editing and
	// regenerating its way through a conversation.
	fast := apitest.Setup(t, apitest.Options{Workers: true})
	// chats maps each recording to the conversation whose last message it
	// folds into.
	type chatOf struct {
		tb *apitest.Bundle
		id uuid.UUID
	}
	chats := map[string]chatOf{}
	var mu sync.Mutex
	record := func(name string, tb *apitest.Bundle, id uuid.UUID) {
		mu.Lock()
		defer mu.Unlock()
		chats[name] = chatOf{tb, id}
	}

	t.Run("Record", func(t *testing.T) {
		t.Run("CompleteDemoReply", func(t *testing.T) {
			t.Parallel()
			chat := uuid.New()
			post := openUI(t, "POST", demo.URL+"/v1/ai-sdk/chat", nil, chatBody(chat.String(), "submit-message", "What is 6 times 7?"))
			chunks := post.rest(t)
			post.save(t, dir, "complete")
			record("complete", demo, chat)
			st := demo.State(t, "local", chat)
			if len(st.Messages) != 2 || st.Messages[0].Blocks[0].Content != "What is 6 times 7?" {
				t.Fatalf("the chat's conversation: %+v", st.Messages)
			}
			reply := st.Messages[1]
			if chunks[0]["type"] != "start" || chunks[0]["messageId"] != reply.ID.String() || chunks[1]["type"] != "start-step" {
				t.Fatalf("stream starts %v", chunks[:2])
			}
			types := chunkTypes(chunks)
			for _, want := range []string{"reasoning-start", "reasoning-delta", "reasoning-end", "tool-input-start", "tool-input-delta",
				"tool-input-available", "tool-output-available", "finish-step start-step text-start", "text-delta", "text-end"} {
				if !strings.Contains(types, want) {
					t.Errorf("no %s in %s", want, types)
				}
			}
			if !strings.HasSuffix(types, "text-end finish-step finish [DONE]") {
				t.Errorf("stream ends %s", types)
			}
			if last := chunks[len(chunks)-2]; last["finishReason"] != "stop" {
				t.Errorf("finish %v", last)
			}
			var text strings.Builder
			for _, c := range chunks {
				if c["type"] == "text-delta" {
					text.WriteString(c["delta"].(string))
				}
			}
			var want string
			for _, b := range reply.Blocks {
				if b.Type == "text" {
					want += b.Content
				}
			}
			if text.String() != want || !strings.Contains(want, "42") {
				t.Errorf("streamed text %q; the reply holds %q", text.String(), want)
			}
		})

		t.Run("CancelledByStop", func(t *testing.T) {
			t.Parallel()
			chat := uuid.New()
			post := openUI(t, "POST", manual.URL+"/v1/ai-sdk/chat", nil, chatBody(chat.String(), "submit-message", "Tell me a long story"))
			start := post.Next(t)
			st := manual.State(t, "local", chat)
			prompt := st.Messages[1].PromptID.UUID
			if start["messageId"] != st.Messages[1].ID.String() {
				t.Fatalf("start %v", start)
			}
			manual.StartPrompt(t, prompt)
			block := manual.StartBlock(t, prompt, "text", "{}")
			manual.AppendText(t, block, "Once upon ", "a time")
			post.Until(t, "text-delta")
			resp, cancel := apitest.Do(t, "POST", fmt.Sprintf("%s/v1/ai-sdk/chat/%s/stop", manual.URL, chat), nil, nil)
			defer cancel()
			var stopped struct{ Cancelled []string }
			if err := json.NewDecoder(resp.Body).Decode(&stopped); err != nil || resp.StatusCode != 200 ||
				len(stopped.Cancelled) != 1 || stopped.Cancelled[0] != prompt.String() {
				t.Fatalf("stop: %s %+v %v", resp.Status, stopped, err)
			}
			rest := post.rest(t)
			post.save(t, dir, "cancelled")
			record("cancelled", manual, chat)
			if got := chunkTypes(rest); got != "text-delta text-end abort [DONE]" {
				t.Fatalf("after stop: %s", got)
			}
			if st := manual.State(t, "local", chat); st.Messages[1].Status != conversation.MessageCancelled ||
				st.Messages[1].Blocks[0].Content != "Once upon a time" {
				t.Fatalf("the cancelled reply: %+v", st.Messages[1])
			}
			// Stopping again cancels nothing and succeeds.
			resp2, cancel2 := apitest.Do(t, "POST", fmt.Sprintf("%s/v1/ai-sdk/chat/%s/stop", manual.URL, chat), nil, nil)
			defer cancel2()
			if err := json.NewDecoder(resp2.Body).Decode(&stopped); err != nil || resp2.StatusCode != 200 || len(stopped.Cancelled) != 0 {
				t.Fatalf("second stop: %s %+v %v", resp2.Status, stopped, err)
			}
		})

		t.Run("Failed", func(t *testing.T) {
			t.Parallel()
			chat := uuid.New()
			post := openUI(t, "POST", manual.URL+"/v1/ai-sdk/chat", nil, chatBody(chat.String(), "submit-message", "Hello"))
			post.Next(t)
			prompt := manual.State(t, "local", chat).Messages[1].PromptID.UUID
			manual.StartPrompt(t, prompt)
			r := manual.StartBlock(t, prompt, "reasoning", "{}")
			manual.AppendText(t, r, "Hmm.")
			manual.AppendText(t, manual.StartBlock(t, prompt, "text", "{}"), "Partial")
			manual.FailPrompt(t, prompt, "the model is unreachable")
			chunks := post.rest(t)
			post.save(t, dir, "failed")
			record("failed", manual, chat)
			if got := chunkTypes(chunks); !strings.HasSuffix(got, "text-end finish-step error finish [DONE]") {
				t.Fatalf("failed reply ends %s", got)
			}
			if e := chunks[len(chunks)-3]; e["errorText"] != "the model is unreachable" {
				t.Errorf("error chunk %v", e)
			}
			if f := chunks[len(chunks)-2]; f["finishReason"] != "error" {
				t.Errorf("finish chunk %v", f)
			}
		})

		t.Run("LateJoinThroughResume", func(t *testing.T) {
			t.Parallel()
			s := manual.Send(t, "local", uuid.Nil, "What is 6*7?")
			chat := s.ConversationID.String()
			resume := fmt.Sprintf("%s/v1/ai-sdk/chat/%s/stream", manual.URL, chat)
			manual.StartPrompt(t, s.PromptID)
			r := manual.StartBlock(t, s.PromptID, "reasoning", "{}")
			manual.AppendText(t, r, "Use the ", "calculator.")
			manual.EndBlock(t, r)
			use := manual.StartBlock(t, s.PromptID, "tool_use", `{"name": "calc"}`)
			manual.AppendText(t, use, `{"e": `, `"6*7"}`)
			manual.ToolCall(t, use, "calc", `{"e": "6*7"}`, "", "4", "2")
			manual.EndBlock(t, use)
			res := manual.StartBlock(t, s.PromptID, "tool_result", `{"tool": "calc"}`)
			manual.AppendText(t, res, "42")
			manual.EndBlock(t, res)
			text := manual.StartBlock(t, s.PromptID, "text", "{}")
			manual.AppendText(t, text, "Hello, ", "wor")

			late := openUI(t, "GET", resume, nil, nil)
			head := late.Until(t, "text-delta")
			want := "start start-step reasoning-start reasoning-delta reasoning-end tool-input-start tool-input-delta " +
				"tool-input-available tool-output-available finish-step start-step text-start text-delta"
			if got := chunkTypes(head); got != want || head[len(head)-1]["delta"] != "Hello, wor" ||
				head[0]["messageId"] != s.MessageID.String() || head[6]["inputTextDelta"] != `{"e": "6*7"}` {
				t.Fatalf("late join starts\n%s\nwant\n%s\n%v", got, want, head)
			}
			manual.AppendText(t, text, "ld!")
			manual.CompletePrompt(t, s.PromptID)
			rest := late.rest(t)
			if got := chunkTypes(rest); got != "text-delta text-end finish-step finish [DONE]" || rest[0]["delta"] != "ld!" {
				t.Fatalf("the rest: %s %v", got, rest)
			}
			late.save(t, dir, "late")
			record("late", manual, s.ConversationID)

			// Nothing running: 204, as the transport expects.
			resp, cancel := apitest.Do(t, "GET", resume, nil, nil)
			defer cancel()
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("resume with no reply running: %s", resp.Status)
			}
		})

		t.Run("StructuredAndOtherBlocks", func(t *testing.T) {
			t.Parallel()
			chat := uuid.New()
			post := openUI(t, "POST", manual.URL+"/v1/ai-sdk/chat", nil, chatBody(chat.String(), "submit-message", "As JSON"))
			post.Next(t)
			prompt := manual.State(t, "local", chat).Messages[1].PromptID.UUID
			manual.StartPrompt(t, prompt)
			sb := manual.StartBlock(t, prompt, "structured", "{}")
			manual.AppendText(t, sb, `{"answer": `, `42}`)
			manual.EndBlock(t, sb)
			cite := manual.StartBlock(t, prompt, "citation", `{"url": "https://example.com"}`)
			manual.AppendText(t, cite, "Example")
			manual.EndBlock(t, cite)
			manual.CompletePrompt(t, prompt)
			chunks := post.rest(t)
			post.save(t, dir, "structured")
			record("structured", manual, chat)
			if got := chunkTypes(chunks); got != "start-step data-structured data-citation finish-step finish [DONE]" {
				t.Fatalf("chunks %s", got)
			}
			if d, _ := json.Marshal(chunks[1]["data"]); string(d) != `{"answer":42}` {
				t.Errorf("data-structured %s", d)
			}
		})

		// twoTurns is a chat of two completed turns, written by the test.
		twoTurns := func(t *testing.T) (first, second apitest.Sent) {
			first = manual.Send(t, "local", uuid.Nil, "What is 6*7?")
			manual.StartPrompt(t, first.PromptID)
			manual.AppendText(t, manual.StartBlock(t, first.PromptID, "text", "{}"), "42")
			manual.CompletePrompt(t, first.PromptID)
			second = manual.Send(t, "local", first.ConversationID, "And 7*8?")
			manual.StartPrompt(t, second.PromptID)
			manual.AppendText(t, manual.StartBlock(t, second.PromptID, "text", "{}"), "56")
			manual.CompletePrompt(t, second.PromptID)
			return first, second
		}

		t.Run("Edited", func(t *testing.T) {
			t.Parallel()
			// An edit of the second user message as useChat posts it: the
			// chat up to the edited message, which has the client's own
			// id (convo never learns it), and messageId.
			s, _ := twoTurns(t)
			edit := chatBody(s.ConversationID.String(), "submit-message", "What is 6*7?")
			edit["messages"] = append(edit["messages"].([]any),
				map[string]any{"id": s.MessageID.String(), "role": "assistant", "parts": []any{map[string]any{"type": "text", "text": "42"}}},
				map[string]any{"id": "Xq3kS9aTbL0mN2pR", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "And 8*9?"}}})
			edit["messageId"] = "Xq3kS9aTbL0mN2pR"
			edited := openUI(t, "POST", manual.URL+"/v1/ai-sdk/chat", nil, edit)
			start := edited.Next(t)
			st := manual.State(t, "local", s.ConversationID)
			if len(st.Messages) != 4 || st.Messages[2].Blocks[0].Content != "And 8*9?" || st.Messages[2].SiblingCount != 2 ||
				start["messageId"] != st.Messages[3].ID.String() {
				t.Fatalf("after the edit: start %v; the path %+v", start, st.Messages)
			}
			prompt := st.Messages[3].PromptID.UUID
			manual.StartPrompt(t, prompt)
			r := manual.StartBlock(t, prompt, "reasoning", "{}")
			manual.AppendText(t, r, "8 times 9.")
			manual.EndBlock(t, r)
			manual.AppendText(t, manual.StartBlock(t, prompt, "text", "{}"), "7", "2")
			manual.CompletePrompt(t, prompt)
			edited.rest(t)
			edited.save(t, dir, "edited")
			record("edited", manual, s.ConversationID)
		})

		t.Run("Regenerated", func(t *testing.T) {
			t.Parallel()
			// A regenerate of the first reply, as useChat posts it: the
			// chat before that reply; the second turn leaves the path.
			s, _ := twoTurns(t)
			regen := chatBody(s.ConversationID.String(), "regenerate-message", "What is 6*7?")
			regen["messageId"] = s.MessageID.String()
			regenerated := openUI(t, "POST", manual.URL+"/v1/ai-sdk/chat", nil, regen)
			start := regenerated.Next(t)
			st := manual.State(t, "local", s.ConversationID)
			if len(st.Messages) != 2 || st.Messages[1].SiblingCount != 2 || start["messageId"] != st.Messages[1].ID.String() {
				t.Fatalf("after the regenerate: start %v; the path %+v", start, st.Messages)
			}
			prompt := st.Messages[1].PromptID.UUID
			manual.StartPrompt(t, prompt)
			manual.AppendText(t, manual.StartBlock(t, prompt, "text", "{}"), "Forty-", "two.")
			manual.CompletePrompt(t, prompt)
			regenerated.rest(t)
			regenerated.save(t, dir, "regenerated")
			record("regenerated", manual, s.ConversationID)
		})
	})

	// Controls: streams the AI SDK must reject, so that a verifier that
	// checks nothing cannot pass.
	controls := map[string]string{
		"control-delta-without-start": `data: {"type":"start"}` + "\n\n" + `data: {"type":"text-delta","id":"t","delta":"x"}` + "\n\n",
		"control-bad-chunk":           `data: {"type":"text-start","id":7}` + "\n\n",
	}
	for name, body := range controls {
		if err := os.WriteFile(filepath.Join(dir, name+".sse"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if t.Failed() {
		return
	}

	var report verifierReport
	apitest.RunVerifier(t, "aisdk-verify/verify.mjs", "ai", &report, "AISDK_RECORDINGS="+dir, "AISDK_API="+demo.URL+"/v1/ai-sdk/chat",
		"AISDK_CHAT="+fast.URL+"/v1/ai-sdk/chat")
	if len(report.Recordings) != len(chats)+len(controls) {
		t.Fatalf("the verifier read %d recordings, want %d", len(report.Recordings), len(chats)+len(controls))
	}
	for _, rec := range report.Recordings {
		name := strings.TrimSuffix(filepath.Base(rec.File), ".sse")
		if _, control := controls[name]; control {
			if len(rec.SchemaErrors) == 0 && rec.ReadError == nil && len(rec.StreamErrors) == 0 {
				t.Errorf("%s: the AI SDK accepted a broken stream: %+v", name, rec)
			}
			continue
		}
		// The error chunk of a failed reply reaches the reader's onError
		// (useChat's error state) with its text.
		wantErrors := ""
		if name == "failed" {
			wantErrors = "the model is unreachable"
		}
		if len(rec.SchemaErrors) > 0 || rec.ReadError != nil || strings.Join(rec.StreamErrors, "|") != wantErrors || rec.Message == nil {
			t.Errorf("%s (%d chunks): schema %v; read %v; stream errors %q (want %q)", name, rec.Chunks, rec.SchemaErrors,
				apitest.Deref(rec.ReadError), rec.StreamErrors, wantErrors)
			continue
		}
		chat := chats[name]
		st := chat.tb.State(t, "local", chat.id)
		reply := st.Messages[len(st.Messages)-1]
		if rec.Message["id"] != reply.ID.String() || rec.Message["role"] != "assistant" {
			t.Errorf("%s folded into message %v %v; the reply is %s", name, rec.Message["id"], rec.Message["role"], reply.ID)
		}
		parts, _ := rec.Message["parts"].([]any)
		if got, want := uiSummary(parts), stateSummary(reply); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the folded message's parts\n%q\nthe store's reply\n%q", name, got, want)
		}
		// What useChat loads on a reload is what it folded from the stream.
		loaded := uiMessagesOf(t, chat.tb.URL, nil, chat.id.String())
		if got, want := normalized(t, loaded[len(loaded)-1]), normalized(t, rec.Message); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: /messages serves\n%v\nthe stream folded into\n%v", name, got, want)
		}
	}

	tr := report.Transport
	if tr == nil || tr.Error != nil {
		t.Fatalf("DefaultChatTransport run: %+v %s", tr, apitest.Deref(tr.Error))
	}
	st := demo.State(t, "local", uuid.MustParse(tr.ChatID))
	if len(st.Messages) != 4 {
		t.Fatalf("the transport's chat has %d messages, want 2 turns", len(st.Messages))
	}
	for i, f := range []*foldedMessage{tr.Complete, tr.Resumed} {
		reply := st.Messages[2*i+1]
		if f == nil || len(f.StreamErrors) > 0 || f.Message == nil {
			t.Errorf("turn %d: %+v", i, f)
			continue
		}
		if reply.Status != conversation.MessageCompleted {
			t.Errorf("turn %d: reply %s; dropping the response must not stop it", i, reply.Status)
		}
		parts, _ := f.Message["parts"].([]any)
		if f.Message["id"] != reply.ID.String() || !reflect.DeepEqual(uiSummary(parts), stateSummary(reply)) {
			t.Errorf("turn %d folded into %v\n%q\nthe store's reply %s\n%q", i, f.Message["id"], uiSummary(parts), reply.ID, stateSummary(reply))
		}
	}
	if tr.IdleReconnect != "null" {
		t.Errorf("reconnectToStream with no reply running gave %s, want null", tr.IdleReconnect)
	}

	if report.Chats == nil {
		t.Fatal("the verifier did not run the AI SDK's chat")
	}
	for name, run := range map[string]*chatRun{"whole chat": report.Chats.Whole, "last two messages": report.Chats.LastTwo} {
		checkChatRun(t, fast, name, run)
	}
}

// chatRun is the verifier's report of the AI SDK's chat editing and
// regenerating (see chatRuns in verify.mjs).
type chatRun struct {
	ChatID string `json:"chatId"`
	Steps  []struct {
		Name     string           `json:"name"`
		Status   string           `json:"status"`
		Errors   []string         `json:"errors"`
		Messages []map[string]any `json:"messages"`
		Loaded   any              `json:"loaded"`
	} `json:"steps"`
	Error *string `json:"error"`
}

// checkChatRun checks that after every step of the AI SDK's chat (sends,
// edits, a regenerate, a reload) its messages are /messages: the same
// turns, user messages with the same text (the client keeps its own ids
// for the messages it sent), assistant messages identical, ids and parts;
// and that every edit and the regenerate made a new version.
func checkChatRun(t *testing.T, tb *apitest.Bundle, name string, run *chatRun) {
	t.Helper()
	if run == nil || run.Error != nil {
		t.Errorf("%s: the chat failed: %s", name, apitest.Deref(run.Error))
		return
	}
	// The user messages' texts on the path after each step.
	want := [][]string{
		{"What is 6 times 7?"},
		{"What is 6 times 7?", "And 7 times 8?"},
		{"What is 6 times 7?", "And 8 times 9?"},
		{"What is 6 times 7?", "And 8 times 9?"},
		{"What is 2 times 3?"},
		{"What is 2 times 3?", "And 3 times 4?"},
		{"What is 2 times 3?", "And 4 times 5?"},
	}
	if len(run.Steps) != len(want) {
		t.Fatalf("%s: %d steps, want %d", name, len(run.Steps), len(want))
	}
	var lastReply any
	for i, step := range run.Steps {
		loaded, ok := step.Loaded.([]any)
		if step.Status != "ready" || len(step.Errors) > 0 || !ok {
			t.Errorf("%s, %s: status %s, errors %q, /messages %v", name, step.Name, step.Status, step.Errors, step.Loaded)
			continue
		}
		var texts []string
		for j, m := range step.Messages {
			if j >= len(loaded) {
				break
			}
			l := loaded[j].(map[string]any)
			if m["role"] != l["role"] {
				t.Errorf("%s, %s: message %d is the %s's in the chat, the %s's in /messages", name, step.Name, j, m["role"], l["role"])
				continue
			}
			if m["role"] == "user" {
				got, stored := uiSummary(m["parts"].([]any)), uiSummary(l["parts"].([]any))
				if !reflect.DeepEqual(got, stored) {
					t.Errorf("%s, %s: user message %d holds %q in the chat, %q in /messages", name, step.Name, j, got, stored)
				}
				texts = append(texts, strings.TrimPrefix(strings.Join(stored, ""), "text:"))
				continue
			}
			if got, stored := normalized(t, m), normalized(t, l); !reflect.DeepEqual(got, stored) {
				t.Errorf("%s, %s: message %d is\n%v\nin the chat, and in /messages\n%v", name, step.Name, j, got, stored)
			}
		}
		if len(step.Messages) != len(loaded) || !reflect.DeepEqual(texts, want[i]) {
			t.Errorf("%s, %s: the chat has %d messages, /messages %d with the user's %q; want %q", name, step.Name,
				len(step.Messages), len(loaded), texts, want[i])
		}
		if step.Name == "regenerate" && reflect.DeepEqual(normalized(t, loaded[len(loaded)-1].(map[string]any)["id"]), lastReply) {
			t.Errorf("%s: the regenerated reply has the old one's id", name)
		}
		if len(loaded) > 0 {
			lastReply = normalized(t, loaded[len(loaded)-1].(map[string]any)["id"])
		}
	}
	// Every version stays in the tree: the first message and the second
	// turn's message have two versions each.
	st := tb.State(t, "local", uuid.MustParse(run.ChatID))
	if len(st.Messages) != 4 || st.Messages[0].SiblingCount != 2 || st.Messages[2].SiblingCount != 2 {
		t.Errorf("%s: the chat's path %+v; want two turns, each message the second of two versions", name, st.Messages)
	}
}
