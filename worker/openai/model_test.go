package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/convo-dev/convo/worker"
)

// server is a local chat-completions endpoint (httptest, loopback only)
// that records each request and answers it with respond.
type server struct {
	url      string
	mu       sync.Mutex
	bodies   []map[string]any
	headers  []http.Header
	requests int
}

func newServer(t *testing.T, respond func(w http.ResponseWriter)) *server {
	t.Helper()
	s := &server{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "no such route "+r.URL.Path, http.StatusNotFound)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("request body %q: %v", b, err)
		}
		s.mu.Lock()
		s.bodies, s.headers = append(s.bodies, body), append(s.headers, r.Header.Clone())
		s.requests++
		s.mu.Unlock()
		respond(w)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL + "/v1"
	return s
}

// events writes SSE data events, then [DONE].
func events(w http.ResponseWriter, data ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, d := range append(data, "[DONE]") {
		fmt.Fprintf(w, "data: %s\n\n", d)
	}
}

func chunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
}

// run streams req from a model on s and returns what it yielded.
func run(t *testing.T, s *server, opts Options, req worker.Request) ([]worker.Event, error) {
	t.Helper()
	opts.BaseURL = s.url
	m, err := NewModel(opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []worker.Event
	for ev, err := range m.Stream(context.Background(), req) {
		if err != nil {
			return got, err
		}
		got = append(got, ev)
	}
	return got, nil
}

// TestRequestBody checks what the SDK sends for a prompt's context and
// configuration, and that it reads no OPENAI_* variable.
func TestRequestBody(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_ORG_ID", "org-from-the-environment")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/not-here")
	s := newServer(t, func(w http.ResponseWriter) { events(w, chunk(`{"content":"ok"}`, "stop")) })
	temp, maxTokens := 0.3, int32(77)
	req := worker.Request{
		Config: worker.ModelConfig{Temperature: &temp, MaxTokens: &maxTokens, ResponseFormat: json.RawMessage(`{"type":"json_object"}`)},
		Messages: []worker.Message{
			{Role: worker.RoleSystem, Text: "Be brief."},
			{Role: worker.RoleUser, Text: "6*7?"},
			{Role: worker.RoleAssistant, ToolCalls: []worker.ToolCall{{ID: "call_1", Name: "calculator", Arguments: `{"expression":"6*7"}`}}},
			{Role: worker.RoleTool, Text: "42", ToolCallID: "call_1", ToolName: "calculator"},
			{Role: worker.RoleAssistant}, // nothing said: left out
			{Role: worker.RoleAssistant, Text: "42."},
			{Role: worker.RoleUser, Text: "Thanks"},
		},
		Tools: []worker.ToolSpec{{Name: "calculator", Description: "adds", Parameters: json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string"}}}`)}},
	}
	if _, err := run(t, s, Options{Model: "default-model"}, req); err != nil {
		t.Fatal(err)
	}
	if h := s.headers[0]; h.Get("Authorization") != "" || h.Get("OpenAI-Organization") != "" {
		t.Errorf("credentials from the environment were sent: %q %q", h.Get("Authorization"), h.Get("OpenAI-Organization"))
	}
	got, _ := json.Marshal(s.bodies[0])
	want := `{"max_tokens":77,"messages":[{"content":"Be brief.","role":"system"},{"content":"6*7?","role":"user"},` +
		`{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"expression\":\"6*7\"}","name":"calculator"},"id":"call_1","type":"function"}]},` +
		`{"content":"42","role":"tool","tool_call_id":"call_1"},{"content":"42.","role":"assistant"},{"content":"Thanks","role":"user"}],` +
		`"model":"default-model","response_format":{"type":"json_object"},"stream":true,"stream_options":{"include_usage":true},"temperature":0.3,` +
		`"tools":[{"function":{"description":"adds","name":"calculator","parameters":{"properties":{"expression":{"type":"string"}},"type":"object"}},"type":"function"}]}`
	if string(got) != want {
		t.Errorf("request body\n%s\nwant\n%s", got, want)
	}

	// With a key: the bearer token, and the prompt's model.
	req.Config = worker.ModelConfig{Model: "gpt-test"}
	if _, err := run(t, s, Options{APIKey: "sk-test", Model: "default-model"}, req); err != nil {
		t.Fatal(err)
	}
	if h := s.headers[1].Get("Authorization"); h != "Bearer sk-test" {
		t.Errorf("Authorization %q", h)
	}
	if m := s.bodies[1]["model"]; m != "gpt-test" {
		t.Errorf("model %v", m)
	}
}

// TestNoRetries: a rate limit or a server error fails at once, after one
// request: the SDK's own retries are off.
func TestNoRetries(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway} {
		s := newServer(t, func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(status)
			fmt.Fprint(w, `<html>upstream trouble</html>`)
		})
		_, err := run(t, s, Options{}, worker.Request{Messages: []worker.Message{{Role: worker.RoleUser, Text: "hi"}}})
		want := fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasSuffix(err.Error(), ": <html>upstream trouble</html>") || s.requests != 1 {
			t.Errorf("HTTP %d: %d requests, error %v; want one request and %q", status, s.requests, err, want)
		}
	}
}

// TestStreamMapping maps a stream to parts: reasoning from either field,
// text, and two tool calls whose arguments arrive split and interleaved.
func TestStreamMapping(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(w http.ResponseWriter) {
		events(w,
			chunk(`{"role":"assistant","content":"","reasoning_content":"Think"}`, ""),
			chunk(`{"reasoning":"ing."}`, ""),
			chunk(`{"content":"Let me."}`, ""),
			chunk(`{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"calc","arguments":"{\"x\""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"stats","arguments":"{}"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}`, ""),
			chunk(`{}`, "tool_calls"))
	})
	got, err := run(t, s, Options{}, worker.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, ev := range got {
		switch ev := ev.(type) {
		case worker.Part:
			fmt.Fprintf(&b, "%d:%T(%v) ", ev.Index, ev.Chunk, ev.Chunk)
		case worker.Flush:
			fmt.Fprintf(&b, "flush %d ", ev.Index)
		case worker.Finish:
			fmt.Fprintf(&b, "finish %s", ev.Reason)
		}
	}
	want := "0:worker.ReasoningChunk(Think) 0:worker.ReasoningChunk(ing.) flush 0 1:worker.MessageChunk(Let me.) flush 1 " +
		`2:worker.ToolCallStart({a calc}) 2:worker.ToolCallArgs({"x") 3:worker.ToolCallStart({b stats}) 3:worker.ToolCallArgs({}) ` +
		"2:worker.ToolCallArgs(:1}) flush 2 flush 3 finish tool_calls"
	if b.String() != want {
		t.Errorf("events\n%s\nwant\n%s", b.String(), want)
	}

	for reason, want := range map[string]worker.Finish{
		// The chunks' id is the response's (gen_ai.response.id).
		"length":         {Reason: worker.FinishLength, ResponseID: "c"},
		"content_filter": {Reason: worker.FinishError, Error: "the provider's content filter stopped the answer", ResponseID: "c"},
		"stop":           {Reason: worker.FinishStop, ResponseID: "c"},
	} {
		s := newServer(t, func(w http.ResponseWriter) { events(w, chunk(`{"content":"x"}`, reason)) })
		got, err := run(t, s, Options{}, worker.Request{})
		if err != nil || len(got) == 0 || got[len(got)-1] != want {
			t.Errorf("%s: %v %v", reason, got, err)
		}
	}
}

// TestStreamUsage: the usage chunk that follows the finish (asked for
// with stream_options.include_usage), or usage sent with the finish, is
// the Finish's Usage; a stream without one finishes without usage, and one
// that breaks after the finish still finishes.
func TestStreamUsage(t *testing.T) {
	t.Parallel()
	usage := `"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19,` +
		`"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}`
	want := &worker.Usage{InputTokens: 12, OutputTokens: 7, CachedInputTokens: 4, ReasoningTokens: 2}
	for name, tc := range map[string]struct {
		respond func(w http.ResponseWriter)
		want    *worker.Usage
	}{
		"after the finish": {func(w http.ResponseWriter) {
			events(w, chunk(`{"content":"hi"}`, "stop"), `{"id":"c","object":"chat.completion.chunk","choices":[],`+usage+`}`)
		}, want},
		"with the finish": {func(w http.ResponseWriter) {
			events(w, strings.TrimSuffix(chunk(`{"content":"hi"}`, "stop"), "}")+","+usage+"}")
		}, want},
		"none": {func(w http.ResponseWriter) { events(w, chunk(`{"content":"hi"}`, "stop")) }, nil},
		"no [DONE] after the finish": {func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\n", chunk(`{"content":"hi"}`, "length"))
		}, nil},
	} {
		s := newServer(t, tc.respond)
		got, err := run(t, s, Options{}, worker.Request{})
		if err != nil || len(got) == 0 {
			t.Fatalf("%s: %v %v", name, got, err)
		}
		f, ok := got[len(got)-1].(worker.Finish)
		if !ok || (f.Usage == nil) != (tc.want == nil) || (f.Usage != nil && *f.Usage != *tc.want) {
			t.Errorf("%s: last event %#v; want a Finish with usage %+v", name, got[len(got)-1], tc.want)
		}
	}
}
