package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"

	. "github.com/convo-dev/convo/worker"
	"github.com/convo-dev/convo/worker/demo"
)

// TestTools runs tools the model calls through the runtime.
func TestTools(t *testing.T) {
	t.Parallel()

	// callTool has a scripted model call tool name with args, then answer
	// with what it was told; it returns the tool_use and tool_result
	// blocks and what the model was told.
	callTool := func(t *testing.T, tools *Tools, cfg Config, name, args string) (conversation.Block, conversation.Block, string) {
		t.Helper()
		var told string
		model := scripted(
			[]any{
				Part{Index: 0, Chunk: ToolCallStart{ID: "c1", Name: name}},
				Part{Index: 0, Chunk: ToolCallArgs(args)},
				Finish{Reason: FinishToolCalls},
			},
			[]any{
				func(req Request) { told = req.Messages[len(req.Messages)-1].Text },
				Part{Index: 0, Chunk: MessageChunk("ok")},
				Finish{Reason: FinishStop},
			},
		)
		tb := setup(t)
		cfg.Models, cfg.Tools = modelsWith(model), tools
		_, res := tb.start(t, cfg)
		s := tb.send(t, uuid.Nil, "go", `{}`)
		if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		m := tb.message(t, s)
		if strings.Join(blockTypes(m), ",") != "tool_use,tool_result,text" {
			t.Fatalf("blocks %v", blockTypes(m))
		}
		return m.Blocks[0], m.Blocks[1], told
	}
	mustTools := func(t *testing.T, tools ...Tool) *Tools {
		ts, err := NewTools(tools...)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}

	t.Run("ProgressStreamsAndResultReturns", func(t *testing.T) {
		t.Parallel()
		type args struct {
			N int `json:"n"`
		}
		count := NewTool("count", "counts to n", json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":100}},"required":["n"]}`),
			func(ctx context.Context, in args, progress io.Writer) (string, error) {
				for i := 1; i <= in.N; i++ {
					fmt.Fprintf(progress, "%d ", i)
				}
				return fmt.Sprintf("counted to %d", in.N), nil
			})
		use, result, told := callTool(t, mustTools(t, count), Config{}, "count", `{"n": 5}`)
		call := use.ToolCall
		if call.Status != conversation.ToolCallCompleted || call.Output != "1 2 3 4 5 counted to 5" {
			t.Errorf("call %s %q", call.Status, call.Output)
		}
		if result.Content != "counted to 5" || told != "counted to 5" {
			t.Errorf("result %q, told %q", result.Content, told)
		}
		if call.EndedAt == nil || call.EndedAt.Before(call.StartedAt) {
			t.Errorf("call has no duration: %v – %v", call.StartedAt, call.EndedAt)
		}
	})

	t.Run("LargeOutputIsTruncatedWithItsLength", func(t *testing.T) {
		t.Parallel()
		big := NewTool("big", "a lot of output", nil,
			func(ctx context.Context, _ struct{}, progress io.Writer) (string, error) {
				// 3-byte characters, written in pieces that split them.
				line := []byte(strings.Repeat("€", 1000))
				for i := 0; i < len(line); i += 7 {
					if _, err := progress.Write(line[i:min(i+7, len(line))]); err != nil {
						return "", err
					}
				}
				return strings.Repeat("x", 50_000), nil
			})
		use, result, told := callTool(t, mustTools(t, big), Config{MaxToolOutput: 1000}, "big", `{}`)
		out := use.ToolCall.Output
		if !strings.HasPrefix(out, strings.Repeat("€", 333)+"\n… [output truncated: 999 of 3000 bytes shown]") {
			t.Errorf("output %q…", out[:min(len(out), 1200)])
		}
		var meta map[string]any
		_ = json.Unmarshal(result.Metadata, &meta)
		if meta["outputBytes"] != float64(50_000) || meta["truncated"] != true {
			t.Errorf("metadata %s", result.Metadata)
		}
		if want := strings.Repeat("x", 1000) + "\n… [truncated: 1000 of 50000 bytes shown]"; result.Content != want || told != want {
			t.Errorf("result %d bytes, told %d bytes", len(result.Content), len(told))
		}
	})

	t.Run("ToolErrorFailsTheCallAndTellsTheModel", func(t *testing.T) {
		t.Parallel()
		use, result, told := callTool(t, demo.Tools(), Config{}, "calculator", `{"expression": "1/0"}`)
		if use.ToolCall.Status != conversation.ToolCallFailed || !strings.Contains(use.ToolCall.Error, "division by zero") {
			t.Errorf("call %s %q", use.ToolCall.Status, use.ToolCall.Error)
		}
		if !strings.Contains(told, "division by zero") || result.Content != told {
			t.Errorf("told %q, result %q", told, result.Content)
		}
	})

	t.Run("PanickingToolFailsTheCall", func(t *testing.T) {
		t.Parallel()
		boom := NewTool("boom", "panics", nil, func(context.Context, struct{}, io.Writer) (string, error) { panic("kaboom") })
		use, _, _ := callTool(t, mustTools(t, boom), Config{}, "boom", `{}`)
		if use.ToolCall.Status != conversation.ToolCallFailed || !strings.Contains(use.ToolCall.Error, "the tool crashed: kaboom") {
			t.Errorf("call %s %q", use.ToolCall.Status, use.ToolCall.Error)
		}
	})

	t.Run("ToolIgnoringItsTimeoutCannotBreakThePrompt", func(t *testing.T) {
		t.Parallel()
		stop := make(chan struct{})
		t.Cleanup(func() { close(stop) })
		stubborn := NewTool("stubborn", "ignores its context", nil, func(ctx context.Context, _ struct{}, progress io.Writer) (string, error) {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return "", nil
				case <-tick.C:
					if _, err := fmt.Fprint(progress, "."); err != nil {
						<-stop // told to stop writing; a stubborn tool keeps running
						return "", err
					}
				}
			}
		})
		use, _, told := callTool(t, mustTools(t, stubborn), Config{ToolTimeout: 100 * time.Millisecond}, "stubborn", `{}`)
		if use.ToolCall.Status != conversation.ToolCallFailed || !strings.Contains(told, "no result within 100ms") {
			t.Errorf("call %s %q, told %q", use.ToolCall.Status, use.ToolCall.Error, told)
		}
	})

	t.Run("SlowToolTimesOut", func(t *testing.T) {
		t.Parallel()
		slow := NewTool("slow", "waits", nil, func(ctx context.Context, _ struct{}, _ io.Writer) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		})
		use, _, _ := callTool(t, mustTools(t, slow), Config{ToolTimeout: 100 * time.Millisecond}, "slow", `{}`)
		if use.ToolCall.Status != conversation.ToolCallFailed || !strings.Contains(use.ToolCall.Error, "no result within 100ms") {
			t.Errorf("call %s %q", use.ToolCall.Status, use.ToolCall.Error)
		}
	})
}

func TestToolRegistry(t *testing.T) {
	t.Parallel()
	ok := func(context.Context, json.RawMessage, io.Writer) (string, error) { return "", nil }
	for name, tool := range map[string]Tool{
		"BadName":          {Name: "no spaces", Run: ok},
		"ClientApproval":   {Name: "x", NeedsApproval: true},
		"OutputSchemaRun":  {Name: "x", Run: ok, OutputSchema: json.RawMessage(`{"type":"object"}`)},
		"OutputSchemaList": {Name: "x", OutputSchema: json.RawMessage(`[]`)},
		"NotObjectSchema":  {Name: "x", Run: ok, Parameters: json.RawMessage(`{"type":"string"}`)},
		"SchemaIsNotJSON":  {Name: "x", Run: ok, Parameters: json.RawMessage(`{`)},
		"DuplicateOfDemo?": {Name: "calculator", Run: ok},
	} {
		_, err := NewTools(demo.CalculatorTool(), tool)
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	ts := demo.Tools()
	specs := ts.Specs()
	if names := specNames(specs); !slices.Equal(names, []string{"ask_user", "browser_info", "calculator", "publish_note", "text_stats"}) {
		t.Errorf("specs %+v", specs)
	}
	if _, found := ts.Lookup("nope"); found {
		t.Error("found a tool that is not there")
	}
	var nilTools *Tools
	if nilTools.Specs() != nil {
		t.Error("nil registry has specs")
	}
}

func specNames(specs []ToolSpec) []string {
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return names
}
