package agui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// eventStream reads an AG-UI event stream, keeping each event's JSON as sent
// for the verifier.
type eventStream struct{ *apitest.JSONStream }

func openAGUI(t testing.TB, method, url string, header http.Header, body any) *eventStream {
	t.Helper()
	if header == nil {
		header = http.Header{}
	}
	header.Set("Content-Type", "application/json")
	header.Set("Accept", "text/event-stream")
	return &eventStream{apitest.OpenJSONStream(t, method, url, header, body, "")}
}

func (a *eventStream) save(t testing.TB, dir, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name+".jsonl"), []byte(strings.Join(a.Raw, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func typeList(events []map[string]any) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = ev["type"].(string)
	}
	return out
}

// collect joins the deltas of one AG-UI content event type.
func collect(events []map[string]any, typ string) string {
	var b strings.Builder
	for _, ev := range events {
		if ev["type"] == typ {
			b.WriteString(ev["delta"].(string))
		}
	}
	return b.String()
}

func runInput(threadID, runID string, texts ...string) map[string]any {
	var messages []map[string]any
	for _, text := range texts {
		messages = append(messages, map[string]any{"id": uuid.NewString(), "role": "user", "content": text})
	}
	return map[string]any{"threadId": threadID, "runId": runID, "messages": messages, "tools": []any{}, "context": []any{},
		"state": map[string]any{}, "forwardedProps": map[string]any{}}
}

func convoField(ev map[string]any, key string) string {
	m, _ := ev["metadata"].(map[string]any)
	c, _ := m["convo"].(map[string]any)
	s, _ := c[key].(string)
	return s
}

// TestAGUIVerifier records AG-UI streams of every kind (a complete demo
// reply, a follower, a cancelled reply, a failed one, a late join,
// overlapping prompts), checks their fields, and has the official AG-UI
// packages (@ag-ui/core's schemas, @ag-ui/client's verifyEvents and
// reducer, and an HttpAgent driving this server) judge them.
func TestAGUIVerifier(t *testing.T) {
	t.Parallel()
	apitest.NeedNode(t, "@ag-ui/client") // before recording
	dir := t.TempDir()
	demo := apitest.Setup(t, apitest.Options{Workers: true, Files: true}) // the in-process demo worker answers
	ctx := context.Background()

	t.Run("Record", func(t *testing.T) {
		t.Run("UserMessageWithFiles", func(t *testing.T) {
			t.Parallel()
			recordFiles(t, demo, dir)
		})
		t.Run("CompleteDemoReplyAndAFollower", func(t *testing.T) {
			t.Parallel()
			thread := uuid.NewString()
			post := openAGUI(t, "POST", demo.URL+"/v1/agui", nil, runInput(thread, "run-1", "What is 6 times 7?"))
			events := post.Until(t, "RUN_FINISHED", "RUN_ERROR")
			post.C.Ended(t) // the run is the whole response
			post.save(t, dir, "complete")

			types := typeList(events)
			if types[0] != "RUN_STARTED" || types[1] != "MESSAGES_SNAPSHOT" || events[0]["threadId"] != thread || events[0]["runId"] != "run-1" {
				t.Fatalf("run starts %v: %v", types[:2], events[0])
			}
			snap := events[1]["messages"].([]any)
			if len(snap) != 1 || snap[0].(map[string]any)["content"] != "What is 6 times 7?" || snap[0].(map[string]any)["role"] != "user" {
				t.Errorf("snapshot %v; want the user's message", snap)
			}
			last := events[len(events)-1]
			if last["type"] != "RUN_FINISHED" || last["runId"] != "run-1" || last["outcome"].(map[string]any)["type"] != "success" {
				t.Fatalf("run ends with %v", last)
			}
			// The thread is the conversation, with the reply the stream carried.
			st := demo.State(t, "local", uuid.MustParse(thread))
			reply := st.Messages[1]
			var text string
			for _, b := range reply.Blocks {
				if b.Type == "text" {
					text = b.Content
				}
			}
			if got := collect(events, "TEXT_MESSAGE_CONTENT"); got != text || !strings.Contains(text, "42") {
				t.Errorf("streamed text %q; the reply holds %q", got, text)
			}
			if convoField(events[0], "messageId") != reply.ID.String() || convoField(events[0], "promptId") != reply.PromptID.UUID.String() {
				t.Errorf("RUN_STARTED metadata %v; want message %s", events[0]["metadata"], reply.ID)
			}
			for _, ev := range events {
				switch ev["type"] {
				case "TOOL_CALL_START":
					if ev["toolCallName"] != "calculator" || ev["parentMessageId"] != reply.ID.String() {
						t.Errorf("tool call %v", ev)
					}
				case "TOOL_CALL_RESULT":
					if !strings.HasSuffix(ev["content"].(string), "42") || ev["messageId"] != ev["toolCallId"] {
						t.Errorf("tool result %v", ev)
					}
				}
			}

			// A follower of the conversation sees the next prompt as a run,
			// after the first reply in its snapshot.
			follow := openAGUI(t, "GET", fmt.Sprintf("%s/v1/conversations/%s/agui", demo.URL, thread), nil, nil)
			second := openAGUI(t, "POST", demo.URL+"/v1/agui", nil, runInput(thread, "run-2", "And 7 times 8?"))
			second.Until(t, "RUN_FINISHED", "RUN_ERROR")
			followed := follow.Until(t, "RUN_FINISHED", "RUN_ERROR")
			follow.save(t, dir, "follow")
			if followed[0]["type"] != "RUN_STARTED" || followed[0]["runId"] != convoField(followed[0], "promptId") {
				t.Errorf("follower's run %v", followed[0])
			}
			if n := len(followed[1]["messages"].([]any)); n < 5 {
				t.Errorf("follower's snapshot has %d messages; want the first turn's and the new message", n)
			}
		})

		manual := apitest.Setup(t) // no workers: the test writes the replies

		t.Run("Cancelled", func(t *testing.T) {
			t.Parallel()
			post := openAGUI(t, "POST", manual.URL+"/v1/agui", nil, runInput(uuid.NewString(), "", "Tell me a long story"))
			started := post.Next(t)
			prompt := uuid.MustParse(convoField(started, "promptId"))
			if started["runId"] != prompt.String() {
				t.Errorf("without a runId the run is the prompt: %v", started)
			}
			manual.StartPrompt(t, prompt)
			block := manual.StartBlock(t, prompt, "text", "{}")
			manual.AppendText(t, block, "Once upon ", "a time")
			if _, err := manual.Store.CancelPrompt(ctx, "local", prompt); err != nil {
				t.Fatal(err)
			}
			events := post.Until(t, "RUN_FINISHED", "RUN_ERROR")
			post.C.Ended(t)
			post.save(t, dir, "cancelled")
			types := strings.Join(typeList(events), " ")
			if types != "MESSAGES_SNAPSHOT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED" {
				t.Fatalf("events %s", types)
			}
			if out := events[len(events)-1]["outcome"].(map[string]any); out["type"] != "cancelled" {
				t.Errorf("outcome %v", out)
			}
		})

		t.Run("Failed", func(t *testing.T) {
			t.Parallel()
			post := openAGUI(t, "POST", manual.URL+"/v1/agui", nil, runInput(uuid.NewString(), "r", "Hello"))
			prompt := uuid.MustParse(convoField(post.Next(t), "promptId"))
			manual.StartPrompt(t, prompt)
			r := manual.StartBlock(t, prompt, "reasoning", "{}")
			manual.AppendText(t, r, "Hmm.")
			manual.AppendText(t, manual.StartBlock(t, prompt, "text", "{}"), "Partial")
			manual.FailPrompt(t, prompt, "the model is unreachable")
			events := post.Until(t, "RUN_FINISHED", "RUN_ERROR")
			post.C.Ended(t)
			post.save(t, dir, "failed")
			last := events[len(events)-1]
			if last["type"] != "RUN_ERROR" || last["code"] != "PROMPT_FAILED" || last["message"] != "the model is unreachable" {
				t.Fatalf("run ends with %v", last)
			}
		})

		t.Run("LateJoin", func(t *testing.T) {
			t.Parallel()
			s := manual.Send(t, "local", uuid.Nil, "What is 6*7?")
			manual.StartPrompt(t, s.PromptID)
			r := manual.StartBlock(t, s.PromptID, "reasoning", "{}")
			manual.AppendText(t, r, "Use the calculator.")
			manual.EndBlock(t, r)
			use := manual.StartBlock(t, s.PromptID, "tool_use", `{"name": "calc"}`)
			manual.AppendText(t, use, `{"e": "6*7"}`)
			call := manual.ToolCall(t, use, "calc", `{"e": "6*7"}`, "", "42")
			manual.EndBlock(t, use)
			text := manual.StartBlock(t, s.PromptID, "text", "{}")
			manual.AppendText(t, text, "Hello, ", "wor")

			follow := openAGUI(t, "GET", fmt.Sprintf("%s/v1/conversations/%s/agui", manual.URL, s.ConversationID), nil, nil)
			head := []map[string]any{follow.Next(t), follow.Next(t), follow.Next(t), follow.Next(t)}
			if strings.Join(typeList(head), " ") != "RUN_STARTED MESSAGES_SNAPSHOT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT" ||
				head[3]["delta"] != "Hello, wor" || head[2]["messageId"] != text.String() {
				t.Fatalf("late join starts %v", head)
			}
			var roles []string
			for _, m := range head[1]["messages"].([]any) {
				msg := m.(map[string]any)
				roles = append(roles, fmt.Sprint(msg["role"], ":", msg["id"]))
			}
			want := []string{"user:" + s.UserMessageID.String(), "reasoning:" + r.String(), "assistant:" + s.MessageID.String(), "tool:" + call.String()}
			if strings.Join(roles, " ") != strings.Join(want, " ") {
				t.Errorf("snapshot %v; want %v (and not the text still streaming)", roles, want)
			}
			manual.AppendText(t, text, "ld!")
			manual.CompletePrompt(t, s.PromptID)
			rest := follow.Until(t, "RUN_FINISHED", "RUN_ERROR")
			if strings.Join(typeList(rest), " ") != "TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED" || rest[0]["delta"] != "ld!" {
				t.Fatalf("the rest: %v", rest)
			}
			follow.save(t, dir, "late")
		})

		t.Run("OverlappingPrompts", func(t *testing.T) {
			t.Parallel()
			a := manual.Send(t, "local", uuid.Nil, "first")
			follow := openAGUI(t, "GET", fmt.Sprintf("%s/v1/conversations/%s/agui", manual.URL, a.ConversationID), nil, nil)
			manual.StartPrompt(t, a.PromptID)
			ta := manual.StartBlock(t, a.PromptID, "text", "{}")
			manual.AppendText(t, ta, "one")
			// The second message is queued behind the running reply (the
			// server's send policy): its prompt's events come while the
			// first run is open, and wait for a run of their own.
			b := manual.Send(t, "local", a.ConversationID, "second")
			manual.AppendText(t, ta, "!")
			manual.CompletePrompt(t, a.PromptID)
			manual.StartPrompt(t, b.PromptID)
			manual.AppendText(t, manual.StartBlock(t, b.PromptID, "text", "{}"), "t", "wo")
			manual.CompletePrompt(t, b.PromptID)
			first := follow.Until(t, "RUN_FINISHED")
			second := follow.Until(t, "RUN_FINISHED")
			follow.save(t, dir, "overlap")
			if first[0]["runId"] != a.PromptID.String() || second[0]["runId"] != b.PromptID.String() ||
				collect(first, "TEXT_MESSAGE_CONTENT") != "one!" || collect(second, "TEXT_MESSAGE_CONTENT") != "two" {
				t.Fatalf("runs:\n%v\n%v", first, second)
			}
		})
	})

	// Controls: streams the verifier must reject, so that a verifier that
	// checks nothing cannot pass.
	controls := map[string]string{
		"control-content-without-start": `{"type":"RUN_STARTED","threadId":"t","runId":"r"}` + "\n" +
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}` + "\n",
		"control-event-after-finish": `{"type":"RUN_STARTED","threadId":"t","runId":"r"}` + "\n" +
			`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}` + "\n" + `{"type":"TEXT_MESSAGE_START","messageId":"m"}` + "\n",
	}
	for name, body := range controls {
		if err := os.WriteFile(filepath.Join(dir, name+".jsonl"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if t.Failed() {
		return
	}

	var report verifierReport
	apitest.RunVerifier(t, "agui-verify/verify.mjs", "@ag-ui/client", &report, "AGUI_RECORDINGS="+dir, "AGUI_URL="+demo.URL+"/v1/agui")
	if len(report.Recordings) != 9 {
		t.Fatalf("the verifier read %d recordings, want 9", len(report.Recordings))
	}
	for _, rec := range report.Recordings {
		name := strings.TrimSuffix(filepath.Base(rec.File), ".jsonl")
		if _, control := controls[name]; control {
			if rec.VerifyError == nil {
				t.Errorf("%s: the verifier accepted a broken stream", name)
			}
			continue
		}
		if len(rec.SchemaErrors) > 0 || rec.VerifyError != nil || rec.ApplyError != nil || rec.Events == 0 {
			t.Errorf("%s (%d events): schema %v; verifyEvents %v; reducer %v", name, rec.Events, rec.SchemaErrors, apitest.Deref(rec.VerifyError), apitest.Deref(rec.ApplyError))
		}
		if name == "late" {
			// The client's reducer shows the in-flight text exactly once.
			var texts []string
			for _, m := range rec.Messages {
				if m["role"] == "assistant" && m["content"] != nil && m["content"] != "" {
					texts = append(texts, m["content"].(string))
				}
			}
			if strings.Join(texts, "|") != "Hello, world!" {
				t.Errorf("late join reduced to %q", texts)
			}
		}
	}

	h := report.HTTPAgent
	if h == nil || len(h.Runs) != 2 {
		t.Fatalf("HttpAgent report: %+v", h)
	}
	st := demo.State(t, "local", uuid.MustParse(h.ThreadID))
	if len(st.Messages) != 4 {
		t.Fatalf("HttpAgent's thread has %d messages, want 2 turns", len(st.Messages))
	}
	for i, run := range h.Runs {
		if run.Error != nil || len(run.SchemaErrors) > 0 {
			t.Errorf("HttpAgent run %d: %v %v", i, apitest.Deref(run.Error), run.SchemaErrors)
			continue
		}
		types := typeList(run.Events)
		if types[0] != "RUN_STARTED" || types[len(types)-1] != "RUN_FINISHED" {
			t.Errorf("HttpAgent run %d: %v", i, types)
		}
		// The agent's messages end with convo's reply, text for text.
		reply := st.Messages[2*i+1]
		var want string
		for _, b := range reply.Blocks {
			if b.Type == "text" {
				want = b.Content
			}
		}
		last := run.Messages[len(run.Messages)-1]
		if last["role"] != "assistant" || last["content"] != want || want == "" {
			t.Errorf("HttpAgent run %d ends with %v; convo's reply is %q", i, last, want)
		}
		if user := run.Messages[len(run.Messages)-5]; user["id"] != st.Messages[2*i].ID.String() {
			t.Errorf("HttpAgent run %d: the user message %v is not convo's %s", i, user, st.Messages[2*i].ID)
		}
	}
}

type verifierReport struct {
	Recordings []struct {
		File         string           `json:"file"`
		Events       int              `json:"events"`
		SchemaErrors []string         `json:"schemaErrors"`
		VerifyError  *string          `json:"verifyError"`
		ApplyError   *string          `json:"applyError"`
		Messages     []map[string]any `json:"messages"`
	} `json:"recordings"`
	HTTPAgent *struct {
		ThreadID string `json:"threadId"`
		Runs     []struct {
			Events       []map[string]any `json:"events"`
			SchemaErrors []string         `json:"schemaErrors"`
			Error        *string          `json:"error"`
			Messages     []map[string]any `json:"messages"`
		} `json:"runs"`
	} `json:"httpAgent"`
}

// TestAGUIRequests checks what POST /v1/agui refuses, and what it reads
// from a RunAgentInput.
func TestAGUIRequests(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	ctx := context.Background()
	alice, mallory := apitest.TokenFor(t, "alice"), apitest.TokenFor(t, "mallory")
	s := tb.Send(t, "alice", uuid.Nil, "hello")
	thread := s.ConversationID.String()
	withParts := runInput(thread, "r")
	withParts["messages"] = []any{map[string]any{"id": "m", "role": "user", "content": []any{
		map[string]any{"type": "text", "text": "Look:"}, map[string]any{"type": "image", "source": map[string]any{"type": "url", "value": "x"}}}}}
	hot := runInput(thread, "r", "hi")
	hot["forwardedProps"] = map[string]any{"model": map[string]any{"temperature": 3}}
	unknownField := runInput(thread, "r", "hi")
	unknownField["forwardedProps"] = map[string]any{"model": map[string]any{"modle": "x"}}
	repeated := runInput(thread, "r")
	repeated["messages"] = []any{map[string]any{"id": s.UserMessageID.String(), "role": "user", "content": "hello"}}
	assistantOnly := runInput(thread, "r")
	assistantOnly["messages"] = []any{map[string]any{"id": "a", "role": "assistant", "content": "hi"}}

	answering := func(m map[string]any) map[string]any {
		in := runInput(thread, "r", "hello")
		in["messages"] = append(in["messages"].([]map[string]any), m)
		return in
	}
	noCallID := answering(map[string]any{"id": "t", "role": "tool", "content": "42"})
	noRequest := answering(map[string]any{"id": "t", "role": "tool", "content": "42", "toolCallId": uuid.NewString()})
	badResume := runInput(thread, "r")
	badResume["resume"] = []any{map[string]any{"interruptId": uuid.NewString(), "status": "maybe"}}
	resumeNoThread := runInput("", "r")
	resumeNoThread["resume"] = []any{map[string]any{"interruptId": uuid.NewString(), "status": "resolved", "payload": true}}

	t.Run("Refusals", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			token   string
			body    any
			status  int
			code    string
			message string
		}{
			{"NoToken", "", runInput(thread, "r", "hi"), 401, "unauthenticated", ""},
			{"NotJSON", alice, "{", 400, "invalid_argument", "body:"},
			{"ThreadIDNotAUUID", alice, runInput("thread-1", "r", "hi"), 400, "invalid_argument", `threadId: "thread-1" is not a UUID`},
			{"NoUserMessage", alice, assistantOnly, 400, "invalid_argument", "messages: has no user message"},
			{"OnlyWhitespace", alice, runInput(thread, "r", "  "), 400, "invalid_argument", "messages[0].content: must not be only whitespace"},
			{"ImagePartOfAnotherURL", alice, withParts, 400, "invalid_argument", `messages[0].content[1].source.value: must be one of convo's file URLs`},
			{"ModelOutOfRange", alice, hot, 400, "invalid_argument", "forwardedProps.model.temperature"},
			{"ModelUnknownField", alice, unknownField, 400, "invalid_argument", "forwardedProps.model"},
			{"AnotherUsersThread", mallory, runInput(thread, "r", "hi"), 404, "not_found", ""},
			{"ToolMessageWithoutToolCallID", alice, noCallID, 400, "invalid_argument", "messages[1].toolCallId: is required"},
			{"ResumeBadStatus", alice, badResume, 400, "invalid_argument", `resume[0].status: must be resolved or cancelled, got "maybe"`},
			{"ResumeWithoutThread", alice, resumeNoThread, 400, "invalid_argument", "threadId: is required"},
			{"AnswerOfNoRequest", alice, noRequest, 409, "failed_precondition", "has no pending input request"},
			{"AnswerInAnotherUsersThread", mallory, noRequest, 404, "not_found", ""},
			{"UserMessageAlreadySent", alice, repeated, 409, "failed_precondition", "already in the conversation"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				var body []byte
				if str, ok := tc.body.(string); ok {
					body = []byte(str)
				} else {
					body, _ = json.Marshal(tc.body)
				}
				header := http.Header{"Content-Type": {"application/json"}}
				if tc.token != "" {
					header.Set("Authorization", "Bearer "+tc.token)
				}
				resp, cancel := apitest.Do(t, "POST", tb.URL+"/v1/agui", header, bytes.NewReader(body))
				defer cancel()
				code, message := apitest.ErrorBody(t, resp)
				if resp.StatusCode != tc.status || code != tc.code || !strings.Contains(message, tc.message) {
					t.Fatalf("%d %s %q; want %d %s containing %q", resp.StatusCode, code, message, tc.status, tc.code, tc.message)
				}
			})
		}
	})
	if st := tb.State(t, "alice", s.ConversationID); len(st.Messages) != 2 {
		t.Errorf("refused runs changed the conversation: %d messages", len(st.Messages))
	}

	t.Run("ModelFromForwardedProps", func(t *testing.T) {
		t.Parallel()
		in := runInput(thread, "r", "be brief")
		in["forwardedProps"] = map[string]any{"model": map[string]any{"provider": "demo", "temperature": 0.5}, "other": true}
		run := openAGUI(t, "POST", tb.URL+"/v1/agui", apitest.Bearer(alice), in)
		prompt := uuid.MustParse(convoField(run.Next(t), "promptId"))
		tr, err := tb.Store.Trace(ctx, "alice", uuid.NullUUID{UUID: prompt, Valid: true}, uuid.NullUUID{})
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(tr.Prompt.ModelConfig, &cfg); err != nil || cfg["provider"] != "demo" || cfg["temperature"] != 0.5 {
			t.Fatalf("model config %s (%v)", tr.Prompt.ModelConfig, err)
		}
	})

	t.Run("NewThreadIsCreated", func(t *testing.T) {
		t.Parallel()
		id := uuid.New()
		run := openAGUI(t, "POST", tb.URL+"/v1/agui", apitest.Bearer(alice), runInput(id.String(), "r", "new here"))
		if started := run.Next(t); started["threadId"] != id.String() {
			t.Fatalf("RUN_STARTED %v", started)
		}
		if st := tb.State(t, "alice", id); len(st.Messages) != 2 || st.Conversation.Title != "new here" {
			t.Fatalf("the thread's conversation: %+v", st)
		}
	})

	t.Run("NoThreadStartsAConversation", func(t *testing.T) {
		t.Parallel()
		in := runInput("", "r", "no thread")
		delete(in, "threadId")
		run := openAGUI(t, "POST", tb.URL+"/v1/agui", http.Header{"Authorization": {"Bearer " + alice}}, in)
		started := run.Next(t)
		id, err := uuid.Parse(fmt.Sprint(started["threadId"]))
		if err != nil || id == s.ConversationID {
			t.Fatalf("RUN_STARTED %v", started)
		}
		tb.State(t, "alice", id)
	})
}

// TestAGUIStreamCutOff checks how a follower's stream ends while a run is
// open: a RUN_ERROR saying why, then the end of the response.
func TestAGUIStreamCutOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, code string
		cut        func(tb *apitest.Bundle, s apitest.Sent)
	}{
		{"ServerShutdown", "STREAM_INTERRUPTED", func(tb *apitest.Bundle, s apitest.Sent) { tb.StopHub() }},
		{"ConversationDeleted", "CONVERSATION_DELETED", func(tb *apitest.Bundle, s apitest.Sent) {
			if err := tb.Store.DeleteConversation(context.Background(), "local", s.ConversationID); err != nil {
				t.Error(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tb := apitest.Setup(t)
			s := tb.Send(t, "local", uuid.Nil, "hello")
			follow := openAGUI(t, "GET", fmt.Sprintf("%s/v1/conversations/%s/agui", tb.URL, s.ConversationID), nil, nil)
			follow.Until(t, "MESSAGES_SNAPSHOT")
			tc.cut(tb, s)
			events := follow.Until(t, "RUN_ERROR", "RUN_FINISHED")
			if last := events[len(events)-1]; last["type"] != "RUN_ERROR" || last["code"] != tc.code {
				t.Fatalf("cut off with %v", last)
			}
			follow.C.Ended(t)
		})
	}
}
