package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"

	. "github.com/convo-dev/convo/worker"
)

// TestParts drives the translation of typed parts into blocks with
// scripted models.
func TestParts(t *testing.T) {
	t.Parallel()

	// run sends a message to model and returns the result and the reply.
	run := func(t *testing.T, model Model, cfg Config) (Result, conversation.Message, *testBundle, sent) {
		t.Helper()
		tb := setup(t)
		cfg.Models = modelsWith(model)
		_, res := tb.start(t, cfg)
		s := tb.send(t, uuid.Nil, "hi", `{}`)
		r := res.wait(t, s.promptID, 20*time.Second)
		return r, tb.message(t, s), tb, s
	}

	t.Run("StructuredOutputIsValidatedAtFlush", func(t *testing.T) {
		t.Parallel()
		r, m, _, _ := run(t, scripted([]any{
			Part{Index: 0, Chunk: StructuredChunk(`{"answer": `)},
			Part{Index: 0, Chunk: StructuredChunk(`42, "unit": "°C"}`)},
			Flush{Index: 0, Metadata: map[string]any{"schema": "answer"}},
			Finish{Reason: FinishStop},
		}), Config{})
		if r.Outcome != OutcomeCompleted || len(m.Blocks) != 1 {
			t.Fatalf("%s %v, %d blocks", r.Outcome, r.Err, len(m.Blocks))
		}
		b := m.Blocks[0]
		if b.Type != "structured" || b.Content != `{"answer": 42, "unit": "°C"}` || !strings.Contains(string(b.Metadata), `"schema": "answer"`) {
			t.Errorf("block %s %q %s", b.Type, b.Content, b.Metadata)
		}
	})

	t.Run("InvalidStructuredOutputFailsThePrompt", func(t *testing.T) {
		t.Parallel()
		r, m, tb, s := run(t, scripted([]any{
			Part{Index: 0, Chunk: StructuredChunk(`{"answer": 4`)},
			Finish{Reason: FinishStop},
		}), Config{})
		_, errText := tb.prompt(t, s.promptID)
		if r.Outcome != OutcomeFailed || !strings.Contains(errText, "structured output is not valid JSON") {
			t.Errorf("outcome %s, error %q", r.Outcome, errText)
		}
		// The partial block stays, ended by fail_prompt.
		if len(m.Blocks) != 1 || m.Blocks[0].Content != `{"answer": 4` || m.Blocks[0].Status != conversation.BlockCompleted {
			t.Errorf("blocks %+v", m.Blocks)
		}
	})

	t.Run("InvalidToolArgumentsFailTheCallNotThePrompt", func(t *testing.T) {
		t.Parallel()
		var told string
		r, m, _, _ := run(t, scripted(
			[]any{
				Part{Index: 0, Chunk: MessageChunk("Let me compute. ")},
				Part{Index: 1, Chunk: ToolCallStart{ID: "call_1"}},
				Part{Index: 1, Chunk: ToolCallStart{ID: "call_ignored", Name: "calculator"}},
				Part{Index: 1, Chunk: ToolCallStart{Name: "ignored"}},
				Part{Index: 1, Chunk: ToolCallArgs(`{"expression": `)},
				Part{Index: 1, Chunk: ToolCallArgs(`"1 +`)},
				Flush{Index: 0},
				Flush{Index: 1},
				Finish{Reason: FinishToolCalls},
			},
			[]any{
				func(req Request) { told = req.Messages[len(req.Messages)-1].Text },
				Part{Index: 0, Chunk: MessageChunk("My arguments were broken.")},
				Finish{Reason: FinishStop},
			},
		), Config{})
		if r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		if !strings.Contains(told, "invalid argument JSON for tool calculator") {
			t.Errorf("the model was told %q", told)
		}
		types := blockTypes(m)
		if strings.Join(types, ",") != "text,tool_use,tool_result,text" {
			t.Fatalf("blocks %v", types)
		}
		use, result := m.Blocks[1], m.Blocks[2]
		if use.Content != `{"expression": "1 +` || use.ToolCall == nil {
			t.Fatalf("tool_use %q, call %+v", use.Content, use.ToolCall)
		}
		call := use.ToolCall
		if call.Name != "calculator" || call.Status != conversation.ToolCallFailed ||
			!strings.Contains(call.Error, "invalid argument JSON for tool calculator: not valid JSON: unterminated string at byte 19") {
			t.Errorf("call %s %s %q", call.Name, call.Status, call.Error)
		}
		var raw string
		if json.Unmarshal(call.Input, &raw) != nil || raw != `{"expression": "1 +` {
			t.Errorf("input %s: want the raw arguments as a JSON string", call.Input)
		}
		if !strings.Contains(string(use.Metadata), `"callId": "call_1"`) {
			t.Errorf("first non-empty id should win: %s", use.Metadata)
		}
		if !strings.HasPrefix(result.Content, "error: invalid argument JSON") || !strings.Contains(string(result.Metadata), `"isError": true`) {
			t.Errorf("tool_result %q %s", result.Content, result.Metadata)
		}
	})

	t.Run("ArgumentsNotMatchingTheSchemaFailTheCall", func(t *testing.T) {
		t.Parallel()
		r, m, _, _ := run(t, scripted(
			[]any{
				Part{Index: 0, Chunk: ToolCallStart{ID: "c", Name: "calculator"}},
				Part{Index: 0, Chunk: ToolCallArgs(`{"expr": "1+1"}`)},
				Finish{Reason: FinishToolCalls},
			},
			[]any{Finish{Reason: FinishStop}},
		), Config{})
		if r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		call := m.Blocks[0].ToolCall
		if call.Status != conversation.ToolCallFailed || !strings.Contains(call.Error, "$: missing property 'expression'") {
			t.Errorf("call %s %q", call.Status, call.Error)
		}
	})

	t.Run("UnknownToolFailsTheCall", func(t *testing.T) {
		t.Parallel()
		r, m, _, _ := run(t, scripted(
			[]any{
				Part{Index: 3, Chunk: ToolCallStart{ID: "c", Name: "teleport"}},
				Finish{Reason: FinishToolCalls},
			},
			[]any{Part{Index: 0, Chunk: MessageChunk("I cannot.")}, Finish{Reason: FinishStop}},
		), Config{})
		call := m.Blocks[0].ToolCall
		if r.Outcome != OutcomeCompleted || call.Status != conversation.ToolCallFailed || !strings.Contains(call.Error, `no tool called "teleport"`) {
			t.Errorf("outcome %s, call %s %q", r.Outcome, call.Status, call.Error)
		}
		if string(call.Input) != "{}" {
			t.Errorf("no arguments: input %s, want {}", call.Input)
		}
	})

	t.Run("ReasoningMetadataMerges", func(t *testing.T) {
		t.Parallel()
		r, m, _, _ := run(t, scripted([]any{
			Part{Index: 0, Chunk: ReasoningChunk("thinking"), Metadata: map[string]any{"signature": "part1"}},
			Part{Index: 0, Chunk: ReasoningChunk("…"), Metadata: map[string]any{"signature": "part2", "kept": true}},
			Flush{Index: 0, Metadata: map[string]any{"signature": "final"}},
			Part{Index: 1, Chunk: MessageChunk("")}, // empty: no block
			Part{Index: 2, Chunk: MessageChunk("done")},
		}), Config{})
		if r.Outcome != OutcomeCompleted || len(m.Blocks) != 2 {
			t.Fatalf("%s %v, blocks %v", r.Outcome, r.Err, blockTypes(m))
		}
		var meta map[string]any
		_ = json.Unmarshal(m.Blocks[0].Metadata, &meta)
		if meta["signature"] != "final" || meta["kept"] != true || m.Blocks[0].Content != "thinking…" {
			t.Errorf("reasoning %q %s", m.Blocks[0].Content, m.Blocks[0].Metadata)
		}
	})

	t.Run("ModelErrorFailsThePromptWithItsMessage", func(t *testing.T) {
		t.Parallel()
		r, m, tb, s := run(t, scripted([]any{
			Part{Index: 0, Chunk: MessageChunk("Half an ans")},
			errors.New("the provider went away"),
		}), Config{})
		_, errText := tb.prompt(t, s.promptID)
		if r.Outcome != OutcomeFailed || errText != "the provider went away" || m.Blocks[0].Content != "Half an ans" {
			t.Errorf("outcome %s, error %q, blocks %+v", r.Outcome, errText, m.Blocks)
		}
	})

	t.Run("FinishErrorFailsThePrompt", func(t *testing.T) {
		t.Parallel()
		r, _, tb, s := run(t, scripted([]any{Finish{Reason: FinishError, Error: "content filtered"}}), Config{})
		if _, errText := tb.prompt(t, s.promptID); r.Outcome != OutcomeFailed || errText != "content filtered" {
			t.Errorf("outcome %s, error %q", r.Outcome, errText)
		}
	})

	t.Run("MixedKindsOnOneIndexFailThePrompt", func(t *testing.T) {
		t.Parallel()
		r, _, tb, s := run(t, scripted([]any{
			Part{Index: 0, Chunk: MessageChunk("a")},
			Part{Index: 0, Chunk: ReasoningChunk("b")},
		}), Config{})
		if _, errText := tb.prompt(t, s.promptID); r.Outcome != OutcomeFailed || !strings.Contains(errText, "streamed a reasoning chunk to output item 0, which holds a message") {
			t.Errorf("outcome %s, error %q", r.Outcome, errText)
		}
	})

	t.Run("ModelPanicFailsThePromptNotTheProcess", func(t *testing.T) {
		t.Parallel()
		r, _, tb, s := run(t, scripted([]any{func(Request) { panic("oops") }}), Config{})
		if _, errText := tb.prompt(t, s.promptID); r.Outcome != OutcomeFailed || errText != "the model crashed: oops" {
			t.Errorf("outcome %s, error %q", r.Outcome, errText)
		}
	})

	t.Run("UnknownProviderFailsThePrompt", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		_, res := tb.start(t, Config{})
		s := tb.send(t, uuid.Nil, "hi", `{"provider": "anthropic"}`)
		r := res.wait(t, s.promptID, 20*time.Second)
		if _, errText := tb.prompt(t, s.promptID); r.Outcome != OutcomeFailed || !strings.Contains(errText, `unknown model provider "anthropic" (this worker runs demo)`) {
			t.Errorf("outcome %s, error %q", r.Outcome, errText)
		}
	})

	t.Run("ToolRoundsAreBounded", func(t *testing.T) {
		t.Parallel()
		loop := ModelFunc(func(_ context.Context, req Request) iter.Seq2[Event, error] {
			return func(yield func(Event, error) bool) {
				_ = yield(Part{Index: 0, Chunk: ToolCallStart{ID: "c", Name: "calculator"}}, nil) &&
					yield(Part{Index: 0, Chunk: ToolCallArgs(`{"expression": "1+1"}`)}, nil) &&
					yield(Finish{Reason: FinishToolCalls}, nil)
			}
		})
		r, m, tb, s := run(t, loop, Config{MaxToolRounds: 3})
		if _, errText := tb.prompt(t, s.promptID); r.Outcome != OutcomeFailed || !strings.Contains(errText, "more than 3 rounds") {
			t.Errorf("outcome %s, error %q", r.Outcome, errText)
		}
		if r.Rounds != 4 || len(m.Blocks) != 3*2+1 {
			t.Errorf("rounds %d, blocks %v", r.Rounds, blockTypes(m))
		}
	})
}

func blockTypes(m conversation.Message) []string {
	var out []string
	for _, b := range m.Blocks {
		out = append(out, b.Type)
	}
	return out
}
