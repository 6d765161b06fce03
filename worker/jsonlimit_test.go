package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/jsonlimit"
	"github.com/convo-dev/convo/wire"

	. "github.com/convo-dev/convo/worker"
	"github.com/convo-dev/convo/worker/demo"
)

// TestModelValuesOutOfRange: a model's tool call whose arguments break
// convo's rule for accepted JSON ({"expression": 1e400}) fails as
// arguments its schema refuses do: the model is told why and answers on,
// the arguments are kept as a JSON string, never as such; metadata the
// model hands over with such values (a json.Number 1e400, nesting 70
// deep) is written with jsonlimit's placeholders, the rest of it kept.
// The reply completes, every JSON value stored follows the rule, and the
// conversation converts to its wire form.
func TestModelValuesOutOfRange(t *testing.T) {
	t.Parallel()
	var deep any = "bottom"
	for range 70 {
		deep = map[string]any{"d": deep}
	}
	const args = `{"expression": 1e400}`
	var told string
	model := scripted(
		[]any{
			Part{Index: 0, Chunk: ReasoningChunk("thinking"), Metadata: map[string]any{"signature": "kept", "n": json.Number("1e400")}},
			Flush{Index: 0, Metadata: map[string]any{"deep": deep}},
			Part{Index: 1, Chunk: ToolCallStart{ID: "c1", Name: "calculator"}, Metadata: map[string]any{"tiny": json.Number("1e-400")}},
			Part{Index: 1, Chunk: ToolCallArgs(args)},
			Finish{Reason: FinishToolCalls},
		},
		[]any{
			func(req Request) { told = req.Messages[len(req.Messages)-1].Text },
			Part{Index: 0, Chunk: MessageChunk("My number was too big.")},
			Finish{Reason: FinishStop},
		},
	)
	tb := setup(t)
	_, res := tb.start(t, Config{Models: modelsWith(model), Tools: demo.Tools()})
	s := tb.send(t, uuid.Nil, "compute", `{}`)
	if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
	}
	const why = "invalid arguments for tool calculator: $.expression: number 1e400 is outside the range of a 64-bit float (magnitude between 5e-324 and 1.7e308, or 0)"
	if !strings.Contains(told, why) {
		t.Errorf("the model was told %q, want %q", told, why)
	}
	m := tb.message(t, s)
	if got := strings.Join(blockTypes(m), ","); got != "reasoning,tool_use,tool_result,text" {
		t.Fatalf("blocks %s", got)
	}
	call := m.Blocks[1].ToolCall
	if call == nil || call.Status != conversation.ToolCallFailed || call.Error != why {
		t.Fatalf("call %+v", call)
	}
	var raw string
	if json.Unmarshal(call.Input, &raw) != nil || raw != args {
		t.Errorf("input %s: want the raw arguments as a JSON string", call.Input)
	}
	if r := m.Blocks[2]; r.Content != "error: "+why {
		t.Errorf("tool_result %q", r.Content)
	}
	var meta map[string]any
	if err := json.Unmarshal(m.Blocks[0].Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	if meta["signature"] != "kept" || meta["n"] != jsonlimit.PlaceholderNumber || !strings.Contains(string(m.Blocks[0].Metadata), jsonlimit.PlaceholderDeep) {
		t.Errorf("reasoning metadata %s", m.Blocks[0].Metadata)
	}
	if !strings.Contains(string(m.Blocks[1].Metadata), `"tiny": "`+jsonlimit.PlaceholderNumber+`"`) {
		t.Errorf("tool_use metadata %s", m.Blocks[1].Metadata)
	}

	// No value stored breaks the rule (the events, which wrap them one
	// level deeper, are not values anyone sent), and every reader's
	// conversion works.
	rows, err := tb.db.Query(context.Background(), `
		SELECT metadata::text FROM convo.blocks WHERE message_id = $1
		UNION ALL SELECT input::text FROM convo.tool_calls tc JOIN convo.blocks b ON b.id = tc.block_id WHERE b.message_id = $1`, s.messageID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v *string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != nil {
			if err := jsonlimit.Check([]byte(*v)); err != nil {
				t.Errorf("stored %.80s: %v", *v, err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := wire.Messages(tb.state(t, s.conversationID).Messages); err != nil {
		t.Errorf("messages do not convert: %v", err)
	}
	if _, err := wire.Events(tb.events(t, s.conversationID)); err != nil {
		t.Errorf("events do not convert: %v", err)
	}
}
