package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/internal/jsonlimit"
)

// hostileRequest is one request of the soak's hostile clients: a value
// convo's rule for accepted JSON refuses (jsonlimit), at one door.
type hostileRequest struct {
	name, path, body string
	// want is what the refusal's message must say.
	want string
}

// hostileRequests are the soak's hostile values: numbers out of a
// float64's range (1e400, 1e999999, 1e-400), nesting past 64 levels and
// \u0000, in a client tool's output text (Connect), in a Connect body and
// in HTTP bodies (AG-UI, the AI SDK). Each is refused 400 invalid_argument
// before anything reads the database. (AG-UI and the AI SDK hold an
// output text to the rule once they know the request is a client tool's,
// after reading the thread: TestAGUIHostileAnswers, TestAISDKHostileAnswers.)
func hostileRequests() []hostileRequest {
	huge := "[" + strings.Repeat("1e999999, ", 1_000) + "1]"
	deep := strings.Repeat("[", 65) + strings.Repeat("]", 65)
	quote := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	thread, call := uuid.NewString(), uuid.NewString()
	return []hostileRequest{
		{"ConnectClientToolOutput", "/convo.v1.ConversationService/AnswerInput",
			`{"toolCallId": "` + call + `", "answer": {"clientTool": {"output": ` + quote(huge) + `}}}`,
			"answer.clientTool.output: $[0]: number 1e999999 is outside the range of a 64-bit float"},
		{"ConnectDeepOutput", "/convo.v1.ConversationService/AnswerInput",
			`{"toolCallId": "` + call + `", "answer": {"clientTool": {"output": ` + quote(deep) + `}}}`,
			"answer.clientTool.output: $[0]"},
		{"ConnectHugeTemperature", "/convo.v1.ConversationService/SendMessage",
			`{"text": "hi", "model": {"temperature": 1e400}}`, "body: $.model.temperature: number 1e400"},
		{"ConnectNUL", "/convo.v1.ConversationService/SendMessage",
			`{"text": "a\u0000b"}`, `body: $.text: a string holds \u0000`},
		{"AGUIResumePayload", "/v1/agui",
			`{"threadId": "` + thread + `", "resume": [{"interruptId": "` + call + `", "status": "resolved", "payload": {"approved": true, "n": 1e-400}}]}`,
			"body: $.resume[0].payload.n: number 1e-400"},
		{"AGUIDeepBody", "/v1/agui",
			`{"threadId": "` + thread + `", "forwardedProps": ` + deep + `}`, "body: $.forwardedProps"},
		{"AISDKOutput", "/v1/ai-sdk/chat",
			`{"id": "` + thread + `", "trigger": "submit-message", "messages": [{"id": "a", "role": "assistant", "parts": [{"type": "tool-x", "toolCallId": "` + call + `", "state": "output-available", "output": ` + huge + `}]}]}`,
			"body: $.messages[0].parts[0].output[0]: number 1e999999"},
		{"AISDKOutputNUL", "/v1/ai-sdk/chat",
			`{"id": "` + thread + `", "trigger": "submit-message", "messages": [{"id": "a", "role": "assistant", "parts": [{"type": "tool-x", "toolCallId": "` + call + `", "state": "output-available", "output": ["\u0000"]}]}]}`,
			`body: $.messages[0].parts[0].output[0]: a string holds \u0000`},
	}
}

// hostileStats counts what the hostile clients got.
type hostileStats struct {
	refused, unreachable, wrong atomic.Int64
}

// hostile sends hostile requests to random servers until ctx ends, some
// 20 a second per client. A refusal must be 400 invalid_argument saying
// what was refused; a server that is being restarted may not answer
// (counted apart); anything else is an error of the soak.
func (s *soak) hostile(ctx context.Context, stats *hostileStats) {
	requests := hostileRequests()
	client := &http.Client{Timeout: 10 * time.Second}
	for ctx.Err() == nil && !s.stop.Load() {
		sleep(ctx, time.Duration(20+rand.IntN(80))*time.Millisecond)
		r := requests[rand.IntN(len(requests))]
		code, message, status, err := postHostile(ctx, client, s.serverURL()+r.path, r.body)
		switch {
		case err != nil || status == http.StatusServiceUnavailable:
			// A server stopped (SIGTERM) or draining: not the refusal's
			// to judge.
			stats.unreachable.Add(1)
		case status == http.StatusBadRequest && code == "invalid_argument" && strings.Contains(message, r.want):
			stats.refused.Add(1)
		default:
			if stats.wrong.Add(1) <= 3 {
				s.t.Errorf("hostile %s: got %d %s %q, want 400 invalid_argument saying %q", r.name, status, code, message, r.want)
			}
		}
	}
}

// postHostile posts body as JSON and reads the error's code and message.
func postHostile(ctx context.Context, client *http.Client, url, body string) (code, message string, status int, err error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return "", "", 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return "", "", 0, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return "", "", 0, err
	}
	var e struct{ Code, Message string }
	_ = json.Unmarshal(raw, &e)
	return e.Code, e.Message, res.StatusCode, nil
}

// checkStoredValues fails the soak for any stored JSON value (an answer,
// a request, a tool call's input, block metadata) that breaks convo's rule
// for accepted JSON: no hostile value got in.
func (s *soak) checkStoredValues(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `
		SELECT 'answer', answer::text FROM convo.input_requests WHERE answer IS NOT NULL
		UNION ALL SELECT 'request', request::text FROM convo.input_requests
		UNION ALL SELECT 'input', input::text FROM convo.tool_calls
		UNION ALL SELECT 'metadata', metadata::text FROM convo.blocks WHERE metadata IS NOT NULL`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var what, v string
		if err := rows.Scan(&what, &v); err != nil {
			return err
		}
		if err := jsonlimit.Check([]byte(v)); err != nil {
			bad = append(bad, fmt.Sprintf("%s %.60s: %v", what, v, err))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}
