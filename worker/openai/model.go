// Package openai is a worker.Model for OpenAI-compatible chat-completions
// servers (OpenAI, Ollama, vLLM, llama.cpp's server and others). It
// streams the prompt's context and tools to POST {BaseURL}/chat/completions
// and maps the streamed content, reasoning and tool-call deltas to worker
// Parts. It speaks the wire format itself (a JSON body, then Server-Sent
// Events of chat.completion.chunk): the official SDK's hundreds of
// generated endpoint files took more to compile than the rest of the
// server for the one call used here.
package openai

import (
	"bufio"
	"bytes"
	"cmp"
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

	"github.com/convo-dev/convo/worker"
)

// Options configure an OpenAI-compatible chat-completions model.
type Options struct {
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
	// MaxFileBytes bounds an image or a PDF sent to the model (inline, as
	// a base64 data URL); a larger one is named in a line of text instead.
	// Default DefaultMaxFileBytes (10 MiB).
	MaxFileBytes int64
	// MaxTextFileBytes bounds what is sent of a text or JSON file: its
	// first MaxTextFileBytes, saying the rest is cut. Default
	// DefaultMaxTextFileBytes (100 KB).
	MaxTextFileBytes int64
	// HTTPClient defaults to a client without an overall timeout (a reply
	// may stream for minutes; the two timeouts above bound the waits).
	HTTPClient *http.Client
}

// NewModel returns a Model that streams chat completions from an
// OpenAI-compatible server. It sends the prompt's context (system prompt,
// earlier messages with their tool calls and results, the files of user
// messages as content parts: images and PDFs inline up to MaxFileBytes,
// text and JSON files as text up to MaxTextFileBytes, others named in a
// line of text) and the tools, and
// maps streamed content, reasoning content and tool-call deltas to Parts.
// HTTP errors, rate limits, timeouts and errors sent mid-stream fail the
// prompt with a message that names the server and the cause; nothing is
// retried (the prompt's error says what happened, and a retry belongs to
// whoever sends the prompt again: a reply half streamed before a broken
// connection would otherwise be asked again from the start). It fails for
// a base URL that is not http(s)://host/….
//
// Only Options are used: no OPENAI_* environment variable is read, so a
// key meant for OpenAI never reaches another server.
func NewModel(opts Options) (worker.Model, error) {
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
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	if opts.MaxTextFileBytes <= 0 {
		opts.MaxTextFileBytes = DefaultMaxTextFileBytes
	}
	return &model{opts: opts, endpoint: strings.TrimRight(opts.BaseURL, "/") + "/chat/completions"}, nil
}

type model struct {
	opts     Options
	endpoint string
}

// providerError is a failure of the provider, worded for the prompt's
// error.
type providerError struct{ msg string }

func (e *providerError) Error() string { return e.msg }

func (m *model) errorf(format string, args ...any) error {
	return &providerError{msg: fmt.Sprintf("openai-compatible server %s: ", m.opts.BaseURL) + fmt.Sprintf(format, args...)}
}

// maxEventBytes bounds one line of the event stream (a chunk).
const maxEventBytes = 32 << 20

// Stream implements worker.Model.
func (m *model) Stream(ctx context.Context, req worker.Request) iter.Seq2[worker.Event, error] {
	return func(yield func(worker.Event, error) bool) {
		body, err := m.request(ctx, req)
		if fe, ok := errors.AsType[*fileError](err); ok {
			yield(nil, fe)
			return
		} else if err != nil {
			yield(nil, m.errorf("%v", err))
			return
		}
		b, err := json.Marshal(body)
		if err != nil {
			yield(nil, m.errorf("%v", err))
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
		// failed words the error that ended the request or the stream:
		// ours (a timeout), or the connection's.
		failed := func(err error) error {
			if cause := context.Cause(rctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause
			}
			return m.errorf("request failed: %v", unwrapURLError(err))
		}

		hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, m.endpoint, bytes.NewReader(b))
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
			if ctx.Err() == nil {
				yield(nil, failed(err))
			}
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 300 {
			yield(nil, m.httpError(resp))
			return
		}
		watchdog.Stop()
		stall := time.AfterFunc(m.opts.IdleTimeout, func() {
			cancel(m.errorf("the stream stalled: no data for %s", m.opts.IdleTimeout))
		})
		defer stall.Stop()

		mp := &mapper{structured: len(req.Config.ResponseFormat) > 0, tools: map[int64]int{}}
		events := readEvents(resp.Body)
		// finish is the answer's end once it came: held until the
		// usage chunk that follows it, [DONE], or the end of the body,
		// whichever first (a stream that breaks after the finish loses
		// only the usage).
		var finish *worker.Finish
		var usage *worker.Usage
		var responseID, responseModel string
		done := func() {
			finish.Usage = usage
			finish.ResponseID, finish.ResponseModel = responseID, responseModel
			yield(*finish, nil)
		}
		for data, err := range events {
			if err != nil {
				if finish != nil {
					done()
				} else if ctx.Err() == nil {
					yield(nil, failed(err))
				}
				return
			}
			stall.Reset(m.opts.IdleTimeout)
			if bytes.HasPrefix(data, []byte("[DONE]")) {
				break
			}
			var c struct {
				chatChunk
				Error json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(data, &c); err != nil {
				yield(nil, m.errorf("the stream sent something that is not JSON: %v", err))
				return
			}
			if len(c.Error) > 0 && finish == nil {
				yield(nil, m.errorf("the stream failed: %s", streamErrorMessage(data)))
				return
			}
			if c.Usage != nil {
				usage = c.Usage.usage()
			}
			responseID, responseModel = cmp.Or(responseID, c.ID), cmp.Or(responseModel, c.Model)
			if finish != nil {
				if usage != nil {
					done()
					return
				}
				continue
			}
			evs, ended := mp.chunk(c.chatChunk)
			for _, ev := range evs {
				if f, ok := ev.(worker.Finish); ok {
					finish = &f
					continue
				}
				if !yield(ev, nil) {
					return
				}
			}
			if ended && usage != nil {
				done()
				return
			}
		}
		if finish != nil {
			done()
			return
		}
		if ctx.Err() != nil {
			return // the prompt stopped; nobody is listening
		}
		// The stream ended ([DONE] or the end of the body) before a
		// finish_reason.
		yield(nil, m.errorf("the stream ended before the answer finished"))
	}
}

// readEvents yields the data of each Server-Sent Event of r (its data
// lines joined by newlines), then the read error that ended r, if any
// but its end.
func readEvents(r io.Reader) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, maxEventBytes)
		var data []byte
		for sc.Scan() {
			line := sc.Bytes()
			if len(line) == 0 {
				if len(data) > 0 && !yield(data, nil) {
					return
				}
				data = nil
				continue
			}
			name, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			if string(name) == "data" {
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, value...)
			}
		}
		if err := sc.Err(); err != nil {
			yield(nil, err)
			return
		}
		if len(data) > 0 {
			yield(data, nil)
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

// errorBody is the "error" object of an error response or chunk.
type errorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

func (e *errorBody) message() string {
	msg := e.Message
	if msg == "" {
		msg = "unknown error"
	}
	if e.Type != "" {
		msg += " (" + e.Type + ")"
	}
	return msg
}

// errorDetail words the "error" of a body: an object with a message
// (OpenAI), a string (Ollama), or else the body itself, cut at 500 bytes.
func errorDetail(b []byte) string {
	detail := strings.TrimSpace(string(b))
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && len(body.Error) > 0 {
		var e errorBody
		var s string
		if json.Unmarshal(body.Error, &e) == nil && e.Message != "" {
			detail = e.message()
		} else if json.Unmarshal(body.Error, &s) == nil && s != "" {
			detail = s
		}
	}
	if len(detail) > 500 {
		detail = detail[:500] + "…"
	}
	return detail
}

// streamErrorMessage words an error event sent mid-stream.
func streamErrorMessage(data []byte) string {
	return errorDetail(bytes.TrimSpace(data))
}

// httpError words a non-2xx response.
func (m *model) httpError(resp *http.Response) error {
	var b []byte
	if resp.Body != nil {
		b, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	}
	detail := errorDetail(b)
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
