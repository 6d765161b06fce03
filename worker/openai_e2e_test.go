package worker_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"

	. "github.com/convo-dev/convo/worker"
	"github.com/convo-dev/convo/worker/demo"
	"github.com/convo-dev/convo/worker/openai"
)

// fakeOpenAI is a local chat-completions server (httptest, loopback only)
// that speaks the real SSE wire format. Each request is answered by
// respond, given the decoded request body.
type fakeOpenAI struct {
	srv     *httptest.Server
	mu      sync.Mutex
	bodies  []chatRequest
	headers []http.Header
}

type chatRequest struct {
	Model       string   `json:"model"`
	Stream      bool     `json:"stream"`
	Temperature *float64 `json:"temperature"`
	MaxTokens   *int     `json:"max_tokens"`
	Messages    []struct {
		Role       string  `json:"role"`
		Content    *string `json:"content"`
		ToolCallID string  `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func newFakeOpenAI(t *testing.T, respond func(w http.ResponseWriter, r *http.Request, req chatRequest, n int)) *fakeOpenAI {
	t.Helper()
	f := &fakeOpenAI{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, `{"error": {"message": "no such route"}}`, http.StatusNotFound)
			return
		}
		var req chatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, req)
		f.headers = append(f.headers, r.Header.Clone())
		n := len(f.bodies)
		f.mu.Unlock()
		respond(w, r, req, n)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOpenAI) requests() []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.bodies)
}

// sse writes events in the wire format, flushing after each.
func sse(w http.ResponseWriter, events ...string) {
	for _, e := range events {
		if strings.HasPrefix(e, ":") {
			fmt.Fprintf(w, "%s\n", e) // a comment line, such as a keep-alive
		} else {
			fmt.Fprintf(w, "data: %s\n\n", e)
		}
		w.(http.Flusher).Flush()
	}
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

func delta(d string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":` + d + `,"finish_reason":null}]}`
}

func finish(reason string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}

// startOpenAI starts workers whose default provider is the fake server.
func startOpenAI(t *testing.T, tb *testBundle, f *fakeOpenAI, opts openai.Options) *results {
	t.Helper()
	opts.BaseURL, opts.APIKey = f.srv.URL+"/v1", "sk-test"
	if opts.Model == "" {
		opts.Model = "default-model"
	}
	m, err := openai.NewModel(opts)
	if err != nil {
		t.Fatal(err)
	}
	models := NewModels("openai")
	models.Register("openai", m, opts.Model)
	_, res := tb.start(t, Config{Models: models})
	return res
}

func TestOpenAI(t *testing.T) {
	t.Parallel()

	t.Run("EndToEndWithToolCalls", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		f := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request, req chatRequest, n int) {
			sseHeaders(w)
			switch n {
			case 1: // reasoning, text, then two tool calls whose arguments arrive split and interleaved
				sse(w,
					delta(`{"role":"assistant","content":""}`),
					delta(`{"reasoning_content":"The user wants "}`),
					": keep-alive",
					delta(`{"reasoning_content":"a product."}`),
					delta(`{"content":"Let me "}`),
					delta(`{"content":"compute."}`),
					delta(`{"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"calculator","arguments":""}}]}`),
					delta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"expre"}}]}`),
					delta(`{"tool_calls":[{"index":1,"id":"call_def","type":"function","function":{"name":"text_stats","arguments":"{\"text\":"}}]}`),
					delta(`{"tool_calls":[{"index":0,"function":{"arguments":"ssion\": \"6*"}}]}`),
					delta(`{"tool_calls":[{"index":1,"function":{"arguments":" \"two words\"}"}}]}`),
					delta(`{"tool_calls":[{"index":0,"function":{"arguments":"7\"}"}}]}`),
					finish("tool_calls"),
					"[DONE]")
			case 2:
				fmt.Fprint(w, "data: "+delta(`{"content":"6*7 is "}`)+"\r\n\r\n") // CRLF line endings are SSE too
				sse(w, delta(`{"content":"**42**."}`), finish("stop"),
					`{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5}}`,
					"[DONE]")
			default:
				sse(w, delta(`{"content":"Still 42."}`), finish("stop"), "[DONE]")
			}
		})
		res := startOpenAI(t, tb, f, openai.Options{})
		cfg := `{"provider":"openai","model":"gpt-test","temperature":0.2,"maxTokens":256,"systemPrompt":"Be brief."}`
		s := tb.send(t, uuid.Nil, "What is 6*7?", cfg)
		if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}

		m := tb.message(t, s)
		if got := strings.Join(blockTypes(m), ","); got != "reasoning,text,tool_use,tool_use,tool_result,tool_result,text" {
			t.Fatalf("blocks %s", got)
		}
		if m.Blocks[0].Content != "The user wants a product." || m.Blocks[1].Content != "Let me compute." || m.Blocks[6].Content != "6*7 is **42**." {
			t.Errorf("texts %q %q %q", m.Blocks[0].Content, m.Blocks[1].Content, m.Blocks[6].Content)
		}
		calc, stats := m.Blocks[2], m.Blocks[3]
		if calc.Content != `{"expression": "6*7"}` || calc.ToolCall.Name != "calculator" || calc.ToolCall.Status != conversation.ToolCallCompleted ||
			string(calc.ToolCall.Input) != `{"expression": "6*7"}` {
			t.Errorf("calculator block %q, call %+v", calc.Content, calc.ToolCall)
		}
		if stats.Content != `{"text": "two words"}` || stats.ToolCall.Name != "text_stats" || stats.ToolCall.Status != conversation.ToolCallCompleted {
			t.Errorf("text_stats block %q, call %+v", stats.Content, stats.ToolCall)
		}
		if m.Blocks[4].Content != "42" || !strings.Contains(m.Blocks[5].Content, `"words":2`) {
			t.Errorf("results %q %q", m.Blocks[4].Content, m.Blocks[5].Content)
		}

		reqs := f.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d requests", len(reqs))
		}
		first, second := reqs[0], reqs[1]
		if first.Model != "gpt-test" || !first.Stream || first.Temperature == nil || *first.Temperature != 0.2 ||
			first.MaxTokens == nil || *first.MaxTokens != 256 || len(first.Tools) != len(demo.Tools().Specs()) {
			t.Errorf("first request: %+v", first)
		}
		if h := f.headers[0].Get("Authorization"); h != "Bearer sk-test" {
			t.Errorf("Authorization %q", h)
		}
		if roles := requestRoles(first); roles != "system,user" || *first.Messages[0].Content != "Be brief." {
			t.Errorf("first request roles %s", roles)
		}
		// The second round carries the calls and their results.
		if roles := requestRoles(second); roles != "system,user,assistant,tool,tool" {
			t.Fatalf("second request roles %s", roles)
		}
		a := second.Messages[2]
		if *a.Content != "Let me compute." || len(a.ToolCalls) != 2 || a.ToolCalls[0].ID != "call_abc" ||
			a.ToolCalls[0].Function.Arguments != `{"expression": "6*7"}` || a.ToolCalls[1].ID != "call_def" {
			t.Errorf("assistant message %+v", a)
		}
		if second.Messages[3].ToolCallID != "call_abc" || *second.Messages[3].Content != "42" || second.Messages[4].ToolCallID != "call_def" {
			t.Errorf("tool messages %+v %+v", second.Messages[3], second.Messages[4])
		}

		// A second message sends the first exchange as context, with the
		// calls paired to their results and the reasoning left out.
		next := tb.send(t, s.conversationID, "And again?", `{"provider":"openai"}`)
		if r := res.wait(t, next.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		third := f.requests()[2]
		if third.Model != "default-model" {
			t.Errorf("model %q, want the default", third.Model)
		}
		if roles := requestRoles(third); roles != "user,assistant,tool,tool,assistant,user" {
			t.Fatalf("third request roles %s", roles)
		}
		a = third.Messages[1]
		if *a.Content != "Let me compute." || len(a.ToolCalls) != 2 || a.ToolCalls[0].ID != calc.ToolCall.ID.String() ||
			third.Messages[2].ToolCallID != calc.ToolCall.ID.String() || *third.Messages[2].Content != "42" ||
			third.Messages[3].ToolCallID != stats.ToolCall.ID.String() {
			t.Errorf("context: %+v", third.Messages)
		}
		if *third.Messages[4].Content != "6*7 is **42**." || *third.Messages[5].Content != "And again?" {
			t.Errorf("context ends %q %q", *third.Messages[4].Content, *third.Messages[5].Content)
		}
	})

	// Failures: each must fail the prompt with a clear message.
	for _, tc := range []struct {
		name    string
		opts    openai.Options
		respond func(w http.ResponseWriter, r *http.Request)
		want    string
		partial string // text that reached the reply before the failure
	}{{
		name: "MidStreamError",
		respond: func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			sse(w, delta(`{"content":"Partial "}`), delta(`{"content":"answer"}`),
				`{"error":{"message":"upstream overloaded","type":"server_error"}}`)
		},
		want:    "the stream failed: upstream overloaded (server_error)",
		partial: "Partial answer",
	}, {
		name: "RateLimited",
		respond: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"Rate limit reached for gpt-test","type":"requests","code":"rate_limit_exceeded"}}`)
		},
		want: "rate limited (HTTP 429 Too Many Requests) (retry after 7 s): Rate limit reached for gpt-test (requests)",
	}, {
		name: "Unauthorized",
		respond: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`)
		},
		want: "HTTP 401 Unauthorized: Incorrect API key provided (invalid_request_error)",
	}, {
		name: "OllamaStyleError",
		respond: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"model \"llama9\" not found, try pulling it first"}`)
		},
		want: `HTTP 404 Not Found: model "llama9" not found, try pulling it first`,
	}, {
		name: "NoResponse",
		opts: openai.Options{ResponseTimeout: 300 * time.Millisecond},
		respond: func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		},
		want: "no response within 300ms",
	}, {
		name: "StreamStalls",
		opts: openai.Options{IdleTimeout: 300 * time.Millisecond},
		respond: func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			sse(w, delta(`{"content":"Hello"}`))
			<-r.Context().Done()
		},
		want:    "the stream stalled: no data for 300ms",
		partial: "Hello",
	}, {
		name: "StreamEndsEarly",
		respond: func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			sse(w, delta(`{"content":"Hel"}`))
		},
		want:    "the stream ended before the answer finished",
		partial: "Hel",
	}, {
		name: "NotJSON",
		respond: func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			sse(w, "<html>oops</html>")
		},
		want: "the stream sent something that is not JSON: invalid character '<' looking for beginning of value",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			f := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request, _ chatRequest, _ int) { tc.respond(w, r) })
			res := startOpenAI(t, tb, f, tc.opts)
			s := tb.send(t, uuid.Nil, "hi", `{}`)
			r := res.wait(t, s.promptID, 20*time.Second)
			_, errText := tb.prompt(t, s.promptID)
			prefix := "openai-compatible server " + f.srv.URL + "/v1: "
			if r.Outcome != OutcomeFailed || errText != prefix+tc.want {
				t.Errorf("outcome %s, error %q\nwant %q", r.Outcome, errText, prefix+tc.want)
			}
			m := tb.message(t, s)
			if tc.partial != "" && (len(m.Blocks) != 1 || m.Blocks[0].Content != tc.partial) {
				t.Errorf("partial reply %+v", m.Blocks)
			}
		})
	}

	t.Run("ConnectionRefused", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		f := newFakeOpenAI(t, nil)
		f.srv.Close()
		res := startOpenAI(t, tb, f, openai.Options{})
		s := tb.send(t, uuid.Nil, "hi", `{}`)
		res.wait(t, s.promptID, 20*time.Second)
		if _, errText := tb.prompt(t, s.promptID); !strings.Contains(errText, "request failed: dial tcp") || !strings.Contains(errText, "connection refused") {
			t.Errorf("error %q", errText)
		}
	})

	t.Run("CancelClosesTheStream", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		gone := make(chan time.Time, 1)
		f := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request, _ chatRequest, _ int) {
			sseHeaders(w)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-r.Context().Done():
					gone <- time.Now()
					return
				case <-tick.C:
					sse(w, delta(`{"content":"la "}`))
				}
			}
		})
		res := startOpenAI(t, tb, f, openai.Options{})
		s := tb.send(t, uuid.Nil, "sing", `{}`)
		eventually(t, 10*time.Second, "the reply to stream", func() bool {
			for _, e := range tb.events(t, s.conversationID) {
				if e.Kind == conversation.EventBlockDelta {
					return true
				}
			}
			return false
		})
		cancelled := time.Now()
		if _, err := tb.store.CancelPrompt(t.Context(), "local", s.promptID); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-gone:
			if d := at.Sub(cancelled); d > 500*time.Millisecond {
				t.Errorf("the request ended %s after the cancel", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the request to the model did not end")
		}
		// Cancelled when the cancel notification won the race, stopped when
		// a write refused by the cancelled prompt did: either way the
		// worker stopped and wrote nothing more.
		if r := res.wait(t, s.promptID, 5*time.Second); r.Outcome != OutcomeCancelled && r.Outcome != OutcomeStopped {
			t.Errorf("outcome %s", r.Outcome)
		}
	})
}

func requestRoles(req chatRequest) string {
	var roles []string
	for _, m := range req.Messages {
		roles = append(roles, m.Role)
	}
	return strings.Join(roles, ",")
}
