package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// OpenAIOptions configure an OpenAI-compatible chat-completions client
// (OpenAI, Ollama, vLLM, llama.cpp's server and others speak it).
type OpenAIOptions struct {
	// BaseURL is the API root that /chat/completions is under, for
	// example https://api.openai.com/v1 or http://127.0.0.1:11434/v1.
	BaseURL string
	// APIKey is sent as a bearer token when set.
	APIKey string
	// Model is the model of a prompt whose configuration names none.
	Model string
	// ResponseTimeout bounds the wait for the response's headers.
	// Default 60 s.
	ResponseTimeout time.Duration
	// IdleTimeout bounds the silence between two events of the stream.
	// Default 120 s.
	IdleTimeout time.Duration
	// HTTPClient defaults to a client without an overall timeout (a reply
	// may stream for minutes; the two timeouts above bound the waits).
	HTTPClient *http.Client
}

// NewOpenAIModel returns a Model that streams chat completions from an
// OpenAI-compatible server. It sends the prompt's context (system prompt,
// earlier messages with their tool calls and results) and the tools, and
// maps streamed content, reasoning content and tool-call deltas to Parts.
// HTTP errors, rate limits, timeouts and errors sent mid-stream fail the
// prompt with a message that names the server and the cause.
func NewOpenAIModel(opts OpenAIOptions) (Model, error) {
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai base url %q: want http(s)://host/…", opts.BaseURL)
	}
	if opts.ResponseTimeout <= 0 {
		opts.ResponseTimeout = 60 * time.Second
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 120 * time.Second
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	return &openAIModel{opts: opts, endpoint: strings.TrimRight(opts.BaseURL, "/") + "/chat/completions"}, nil
}

type openAIModel struct {
	opts     OpenAIOptions
	endpoint string
}

// openAIError is a failure of the provider, worded for the prompt's error.
type openAIError struct{ msg string }

func (e *openAIError) Error() string { return e.msg }

func (m *openAIModel) errorf(format string, args ...any) error {
	return &openAIError{msg: fmt.Sprintf("openai-compatible server %s: ", m.opts.BaseURL) + fmt.Sprintf(format, args...)}
}

// Stream implements Model.
func (m *openAIModel) Stream(ctx context.Context, req Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		body, err := json.Marshal(m.requestBody(req))
		if err != nil {
			yield(nil, fmt.Errorf("encode the chat request: %w", err))
			return
		}
		rctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		// One watchdog: first for the response headers, then for every
		// gap in the stream.
		watchdog := time.AfterFunc(m.opts.ResponseTimeout, func() {
			cancel(m.errorf("no response within %s", m.opts.ResponseTimeout))
		})
		defer watchdog.Stop()

		hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, m.endpoint, bytes.NewReader(body))
		if err != nil {
			yield(nil, m.errorf("%v", err))
			return
		}
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("Accept", "text/event-stream")
		if m.opts.APIKey != "" {
			hreq.Header.Set("Authorization", "Bearer "+m.opts.APIKey)
		}
		resp, err := m.opts.HTTPClient.Do(hreq)
		if err != nil {
			if ctx.Err() != nil {
				return // the prompt stopped; nobody is listening
			}
			if cause := context.Cause(rctx); cause != nil && !errors.Is(cause, context.Canceled) {
				yield(nil, cause)
				return
			}
			yield(nil, m.errorf("request failed: %v", unwrapURLError(err)))
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			yield(nil, m.httpError(resp))
			return
		}

		watchdog.Stop()
		stall := time.AfterFunc(m.opts.IdleTimeout, func() {
			cancel(m.errorf("the stream stalled: no data for %s", m.opts.IdleTimeout))
		})
		defer stall.Stop()

		mapper := &openAIMapper{structured: len(req.Config.ResponseFormat) > 0, tools: map[int]int{}}
		sse := newSSEReader(resp.Body)
		for {
			data, err := sse.next()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if cause := context.Cause(rctx); cause != nil && !errors.Is(cause, context.Canceled) {
					yield(nil, cause)
					return
				}
				if errors.Is(err, io.EOF) {
					yield(nil, m.errorf("the stream ended before the answer finished"))
				} else {
					yield(nil, m.errorf("reading the stream: %v", err))
				}
				return
			}
			stall.Reset(m.opts.IdleTimeout)
			if strings.TrimSpace(data) == "[DONE]" {
				for _, ev := range mapper.finish("stop") {
					if !yield(ev, nil) {
						return
					}
				}
				return
			}
			var chunk openAIChunk
			if err := json.Unmarshal([]byte(data), &chunk); err != nil {
				yield(nil, m.errorf("the stream sent something that is not JSON: %.200q", data))
				return
			}
			if chunk.Error != nil {
				yield(nil, m.errorf("the stream failed: %s", chunk.Error.message()))
				return
			}
			events, done := mapper.chunk(chunk)
			for _, ev := range events {
				if !yield(ev, nil) {
					return
				}
			}
			if done {
				return
			}
		}
	}
}

// unwrapURLError drops the "Post "<url>": " prefix, the error already
// names the server.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// httpError words a non-2xx response.
func (m *openAIModel) httpError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	detail := strings.TrimSpace(string(b))
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && len(body.Error) > 0 {
		var e openAIErrorBody
		if json.Unmarshal(body.Error, &e) == nil && e.Message != "" {
			detail = e.message()
		} else {
			var s string
			if json.Unmarshal(body.Error, &s) == nil && s != "" {
				detail = s // Ollama: {"error": "…"}
			}
		}
	}
	if len(detail) > 500 {
		detail = detail[:500] + "…"
	}
	status := resp.Status
	if status == "" {
		status = fmt.Sprint(resp.StatusCode)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		retry := ""
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			retry = fmt.Sprintf(" (retry after %s s)", ra)
		}
		return m.errorf("rate limited (HTTP %s)%s: %s", status, retry, detail)
	}
	return m.errorf("HTTP %s: %s", status, detail)
}

// openAIErrorBody is the "error" object of an error response or chunk.
type openAIErrorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"`
}

func (e *openAIErrorBody) message() string {
	msg := e.Message
	if msg == "" {
		msg = "unknown error"
	}
	if e.Type != "" {
		msg += " (" + e.Type + ")"
	}
	return msg
}

// openAIChunk is one chat.completion.chunk.
type openAIChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"` // DeepSeek, vLLM, llama.cpp
			Reasoning        *string `json:"reasoning"`         // Ollama, OpenRouter
			Refusal          *string `json:"refusal"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error *openAIErrorBody `json:"error"`
}

// openAIMapper turns chunks into Events. Content and reasoning each form
// an item that lasts until the other kind (or a tool call) starts; every
// tool call (by its index in the stream) is an item of its own.
type openAIMapper struct {
	structured bool
	next       int
	textIndex  int
	textKind   itemKind // 0: no text item open
	tools      map[int]int
	open       []int
	finished   bool
}

func (mp *openAIMapper) alloc() int {
	i := mp.next
	mp.next++
	mp.open = append(mp.open, i)
	return i
}

func (mp *openAIMapper) closeText() []Event {
	if mp.textKind == 0 {
		return nil
	}
	mp.textKind = 0
	return mp.flush(mp.textIndex)
}

func (mp *openAIMapper) flush(index int) []Event {
	for i, o := range mp.open {
		if o == index {
			mp.open = append(mp.open[:i], mp.open[i+1:]...)
			return []Event{Flush{Index: index}}
		}
	}
	return nil
}

func (mp *openAIMapper) text(kind itemKind, s string) []Event {
	if s == "" {
		return nil
	}
	var events []Event
	if mp.textKind != kind {
		events = mp.closeText()
		mp.textKind, mp.textIndex = kind, mp.alloc()
	}
	var c Chunk
	switch kind {
	case kindReasoning:
		c = ReasoningChunk(s)
	case kindStructured:
		c = StructuredChunk(s)
	default:
		c = MessageChunk(s)
	}
	return append(events, Part{Index: mp.textIndex, Chunk: c})
}

// chunk maps one chunk; done is true once the answer finished.
func (mp *openAIMapper) chunk(c openAIChunk) (events []Event, done bool) {
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // only the first choice is asked for
		}
		d := ch.Delta
		for _, r := range []*string{d.ReasoningContent, d.Reasoning} {
			if r != nil {
				events = append(events, mp.text(kindReasoning, *r)...)
			}
		}
		if d.Content != nil {
			kind := kindMessage
			if mp.structured {
				kind = kindStructured
			}
			events = append(events, mp.text(kind, *d.Content)...)
		}
		if d.Refusal != nil {
			events = append(events, mp.text(kindMessage, *d.Refusal)...)
		}
		for _, tc := range d.ToolCalls {
			idx, ok := mp.tools[tc.Index]
			if !ok {
				// A tool call ends the text before it.
				events = append(events, mp.closeText()...)
				idx = mp.alloc()
				mp.tools[tc.Index] = idx
			}
			if tc.ID != "" || tc.Function.Name != "" {
				events = append(events, Part{Index: idx, Chunk: ToolCallStart{ID: tc.ID, Name: tc.Function.Name}})
			}
			if tc.Function.Arguments != "" {
				events = append(events, Part{Index: idx, Chunk: ToolCallArgs(tc.Function.Arguments)})
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			return append(events, mp.finish(*ch.FinishReason)...), true
		}
	}
	return events, false
}

// finish flushes every open item and finishes.
func (mp *openAIMapper) finish(reason string) []Event {
	if mp.finished {
		return nil
	}
	mp.finished = true
	var events []Event
	for _, i := range mp.open {
		events = append(events, Flush{Index: i})
	}
	mp.open = nil
	switch reason {
	case "length":
		return append(events, Finish{Reason: FinishLength})
	case "tool_calls", "function_call":
		return append(events, Finish{Reason: FinishToolCalls})
	case "content_filter":
		return append(events, Finish{Reason: FinishError, Error: "the provider's content filter stopped the answer"})
	}
	return append(events, Finish{Reason: FinishStop})
}

// openAIMessage is a message of the chat request.
type openAIMessage struct {
	Role       string           `json:"role"`
	Content    *string          `json:"content"`
	ToolCalls  []openAIToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openAIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type openAITool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// requestBody is the chat.completions request for req.
func (m *openAIModel) requestBody(req Request) map[string]any {
	msgs := make([]openAIMessage, 0, len(req.Messages))
	for _, msg := range req.Messages {
		text := msg.Text
		om := openAIMessage{Role: string(msg.Role), Content: &text}
		switch msg.Role {
		case RoleAssistant:
			if text == "" && len(msg.ToolCalls) == 0 {
				continue
			}
			if text == "" {
				om.Content = nil
			}
			for _, tc := range msg.ToolCalls {
				c := openAIToolCall{ID: tc.ID, Type: "function"}
				c.Function.Name, c.Function.Arguments = tc.Name, tc.Arguments
				om.ToolCalls = append(om.ToolCalls, c)
			}
		case RoleTool:
			om.ToolCallID = msg.ToolCallID
		}
		msgs = append(msgs, om)
	}
	body := map[string]any{"model": req.Config.Model, "messages": msgs, "stream": true}
	if body["model"] == "" {
		body["model"] = m.opts.Model
	}
	if len(req.Tools) > 0 {
		tools := make([]openAITool, len(req.Tools))
		for i, t := range req.Tools {
			tools[i].Type = "function"
			tools[i].Function.Name, tools[i].Function.Description, tools[i].Function.Parameters = t.Name, t.Description, t.Parameters
		}
		body["tools"] = tools
	}
	if req.Config.Temperature != nil {
		body["temperature"] = *req.Config.Temperature
	}
	if req.Config.MaxTokens != nil {
		body["max_tokens"] = *req.Config.MaxTokens
	}
	if len(req.Config.ResponseFormat) > 0 {
		body["response_format"] = req.Config.ResponseFormat
	}
	return body
}
