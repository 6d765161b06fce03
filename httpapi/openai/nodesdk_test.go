package openai_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// nodeReport is what web/openai-verify/verify.mjs prints.
type nodeReport struct {
	Resume struct {
		ID      string          `json:"id"`
		Live    []nodeEvent     `json:"live"`
		Resumed []nodeEvent     `json:"resumed"`
		Final   json.RawMessage `json:"final"`
		Got     json.RawMessage `json:"got"`
	} `json:"resume"`
	Refused struct {
		Raised     bool    `json:"raised"`
		BadRequest bool    `json:"badRequest"`
		Status     int     `json:"status"`
		Type       *string `json:"type"`
		Param      *string `json:"param"`
		Message    string  `json:"message"`
	} `json:"refused"`
	FunctionCall struct {
		First json.RawMessage `json:"first"`
		Call  *struct {
			ID        string `json:"id"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"call"`
		Next *struct {
			ID                 string `json:"id"`
			Status             string `json:"status"`
			PreviousResponseID string `json:"previous_response_id"`
			OutputText         string `json:"output_text"`
		} `json:"next"`
	} `json:"functionCall"`
}

type nodeEvent struct {
	Seq   int64   `json:"seq"`
	Type  string  `json:"type"`
	Delta *string `json:"delta"`
}

// OpenAI's own Node SDK (the npm package openai, web/openai-verify)
// against a server with the demo worker on real PostgreSQL: a background
// streamed response read to its third text delta, aborted mid-reply and
// resumed with responses.retrieve(id, {stream: true, starting_after: n})
// has no gap or repeat in its sequence numbers, its terminal event's
// response is GET's, and its deltas, the response's output_text and the
// conversation's reply are one text; the demo's text_stats call is one
// mcp_call item, its four mcp_call events in the stream. store: false
// raises the SDK's BadRequestError naming store. A function tool's round trip: the demo
// model's call is a function_call item, and a function_call_output sent
// with previous_response_id resumes the reply as a new response that
// says what the tool answered.
func TestOpenAINodeSDK(t *testing.T) {
	t.Parallel()
	apitest.NeedNode(t, "openai")
	// The demo model at a pace at which the reply outlives the aborted
	// stream long enough to be resumed.
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Workers: true, DemoPace: 150})
	var report nodeReport
	apitest.RunVerifier(t, "openai-verify/verify.mjs", "openai", &report,
		"OPENAI_BASE_URL="+tb.URL+"/v1", "OPENAI_API_KEY="+apitest.TokenFor(t, "alice"))

	r := report.Resume
	if len(r.Live) == 0 || len(r.Resumed) == 0 {
		t.Fatalf("live %v, resumed %v: want events on both sides of the abort", r.Live, r.Resumed)
	}
	if last := r.Live[len(r.Live)-1]; last.Type != "response.output_text.delta" {
		t.Fatalf("the aborted stream ends with %s; want an output_text delta (aborted mid-reply)", last.Type)
	}
	all := append(append([]nodeEvent{}, r.Live...), r.Resumed...)
	var streamed strings.Builder
	resumedDeltas := 0
	for i, e := range all {
		if e.Seq != int64(i) {
			t.Fatalf("event %d is numbered %d (%s): %d live, then resumed; want 0, 1, 2 … without a gap or a repeat",
				i, e.Seq, e.Type, len(r.Live))
		}
		if e.Type == "response.output_text.delta" && e.Delta != nil {
			streamed.WriteString(*e.Delta)
			if i >= len(r.Live) {
				resumedDeltas++
			}
		}
	}
	if resumedDeltas == 0 {
		t.Fatalf("the resumed stream carries no text delta: the reply ended before the abort, and the test proves no resume")
	}
	if end := all[len(all)-1]; end.Type != "response.completed" {
		t.Fatalf("the stream ends with %s; want response.completed", end.Type)
	}
	if len(r.Final) == 0 || string(r.Final) == "null" || !jsonEqual(t, string(r.Final), string(r.Got)) {
		t.Fatalf("the stream's final response\n%s\nGET's\n%s", r.Final, r.Got)
	}
	var got struct {
		ID           string `json:"id"`
		Status       string `json:"status"`
		OutputText   string `json:"output_text"`
		Conversation struct {
			ID string `json:"id"`
		} `json:"conversation"`
	}
	if err := json.Unmarshal(r.Got, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != r.ID || got.Status != "completed" || got.OutputText == "" || got.OutputText != streamed.String() {
		t.Fatalf("GET %s; want %s completed, its output_text the streamed deltas %q", r.Got, r.ID, streamed.String())
	}
	st := tb.State(t, "alice", uuid.MustParse(got.Conversation.ID))
	var text string
	for _, b := range st.Messages[len(st.Messages)-1].Blocks {
		if b.Type == "text" {
			text += b.Content
		}
	}
	if text != got.OutputText {
		t.Errorf("the conversation's reply %q; the response's %q", text, got.OutputText)
	}
	// The demo measured the story with text_stats, one of convo's own
	// tools: an mcp_call item, as the SDK read it, and its events among
	// the stream's.
	var calls struct {
		Output []struct {
			Type        string  `json:"type"`
			Name        string  `json:"name"`
			ServerLabel string  `json:"server_label"`
			Status      string  `json:"status"`
			Output      *string `json:"output"`
		} `json:"output"`
	}
	_ = json.Unmarshal(r.Got, &calls)
	mcp := 0
	for _, o := range calls.Output {
		if o.Type == "mcp_call" && o.Name == "text_stats" && o.ServerLabel == "convo" && o.Status == "completed" && apitest.Deref(o.Output) != "" {
			mcp++
		}
	}
	var mcpEvents []string
	for _, e := range all {
		if strings.HasPrefix(e.Type, "response.mcp_call") {
			mcpEvents = append(mcpEvents, e.Type)
		}
	}
	if mcp != 1 || len(mcpEvents) != 4 {
		t.Errorf("the response's output %s, mcp_call events %v; want text_stats's call as one mcp_call item, with its four events", r.Got, mcpEvents)
	}

	f := report.Refused
	if !f.Raised || !f.BadRequest || f.Status != 400 || apitest.Deref(f.Param) != "store" ||
		apitest.Deref(f.Type) != "invalid_request_error" {
		t.Errorf("store: false: raised %v, BadRequestError %v, status %d, type %s, param %s (%s); want the SDK's BadRequestError, 400, invalid_request_error, param store",
			f.Raised, f.BadRequest, f.Status, orNull(f.Type), orNull(f.Param), f.Message)
	}

	fc := report.FunctionCall
	if fc.Call == nil || fc.Call.Name != "get_weather" || fc.Call.ID != "fc_"+fc.Call.CallID || !strings.Contains(fc.Call.Arguments, "Lima") {
		t.Fatalf("the function tool's first response %s; want a function_call of get_weather with city Lima", fc.First)
	}
	var first struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(fc.First, &first)
	if n := fc.Next; n == nil || n.ID != first.ID+"_1" || n.PreviousResponseID != first.ID || n.Status != "completed" ||
		!strings.Contains(n.OutputText, "warm, 24 C") {
		t.Fatalf("the continuation %+v; want %s_1, completed, saying what get_weather answered", fc.Next, first.ID)
	}
}

// orNull is *s, or null when s is nil.
func orNull(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}
