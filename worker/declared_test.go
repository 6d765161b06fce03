package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres/dbq"

	. "github.com/convo-dev/convo/worker"
)

// A client tool the prompt's model configuration declares is offered to
// the model beside the worker's tools: the demo model's "/call" calls it,
// the prompt waits for the client's output (a client_tool request), and
// the answer resumes the reply, whose text says what the tool answered.
func TestDeclaredClientToolRoundTrip(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	_, res := tb.start(t, Config{})
	cfg := `{"provider":"demo","tools":[{"name":"get_weather","description":"The weather in a city.",` +
		`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}`
	s := tb.send(t, uuid.Nil, `/call get_weather {"city":"Paris"}`, cfg)
	if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeWaiting {
		t.Fatalf("outcome %s (%v); want waiting for the client tool", r.Outcome, r.Err)
	}
	ctx := context.Background()
	inputs, err := apiq.New(tb.db).PromptInputs(ctx, s.promptID)
	if err != nil || len(inputs) != 1 {
		t.Fatalf("prompt inputs %+v, %v", inputs, err)
	}
	in := inputs[0]
	var args map[string]string
	if in.Kind != "client_tool" || in.Name != "get_weather" || json.Unmarshal(in.Input, &args) != nil || args["city"] != "Paris" {
		t.Fatalf("request %s of %s with %s; want client_tool of get_weather with the /call arguments", in.Kind, in.Name, in.Input)
	}
	if _, err := dbq.New(tb.db).InputAnswer(ctx, dbq.InputAnswerParams{OwnerID: "local", ToolCallID: in.ToolCallID,
		Answer: json.RawMessage(`{"output":"sunny, 21 C"}`)}); err != nil {
		t.Fatal(err)
	}
	delete(res.seen, s.promptID) // the next result is the resumed run's
	if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
		t.Fatalf("resumed: outcome %s (%v)", r.Outcome, r.Err)
	}
	m := tb.message(t, s)
	last := m.Blocks[len(m.Blocks)-1]
	if last.Type != "text" || !strings.Contains(last.Content, "get\\_weather answered") || !strings.Contains(last.Content, "sunny, 21 C") {
		t.Fatalf("the reply ends with %s %q; want the text saying what get_weather answered", last.Type, last.Content)
	}
}

// A declaration the worker cannot honour fails the reply with an error
// naming the tool: one named as a worker tool, one whose parameters are
// not a schema of an object, an invalid name.
func TestDeclaredToolRefusals(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	_, res := tb.start(t, Config{})
	for _, tc := range []struct{ decl, want string }{
		{`{"name":"calculator"}`, `client tool "calculator", but this worker has a tool of that name`},
		{`{"name":"f","parameters":{"type":"string"}}`, `tool f: parameters must be a schema of "type": "object"`},
		{`{"name":"no spaces"}`, `tool name "no spaces"`},
	} {
		s := tb.send(t, uuid.Nil, "/call calculator {}", `{"provider":"demo","tools":[`+tc.decl+`]}`)
		r := res.wait(t, s.promptID, 20*time.Second)
		status, errText := tb.prompt(t, s.promptID)
		if r.Outcome != OutcomeFailed || status != "failed" || !strings.Contains(errText, tc.want) {
			t.Errorf("declaring %s: %s, %s %q; want failed saying %q", tc.decl, r.Outcome, status, errText, tc.want)
		}
	}
}
