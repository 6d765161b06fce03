package aisdk

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

func blockStartEvent(prompt, block, typ string, meta map[string]any) *convov1.Event {
	s, _ := structpb.NewStruct(meta)
	return &convov1.Event{Kind: &convov1.Event_BlockStart{BlockStart: &convov1.BlockStart{
		PromptId: prompt, BlockId: block, BlockType: typ, Metadata: s}}}
}

func blockDeltaEvent(prompt, block, content string) *convov1.Event {
	return &convov1.Event{Kind: &convov1.Event_BlockDelta{BlockDelta: &convov1.BlockDelta{
		PromptId: prompt, BlockId: block, Content: content}}}
}

func chunkLine(chunks []any) string {
	var out []string
	for _, c := range chunks {
		b, _ := json.Marshal(c)
		out = append(out, string(b))
	}
	return strings.Join(out, "\n")
}

// TestUIReplyToolWithoutName checks a tool_use block whose worker names
// the tool only with the call: its argument deltas wait, and the part
// opens, whole, when the call starts; events of another prompt change
// nothing.
func TestUIReplyToolWithoutName(t *testing.T) {
	t.Parallel()
	r := newUIReply("p", "m")
	r.apply(blockStartEvent("p", "b1", "tool_use", nil))
	r.apply(blockDeltaEvent("p", "b1", `{"x": 1}`))
	r.apply(blockStartEvent("other", "b2", "text", nil))
	r.apply(blockDeltaEvent("other", "b2", "not ours"))
	input, _ := structpb.NewValue(map[string]any{"x": 1})
	r.apply(&convov1.Event{Kind: &convov1.Event_ToolCallStarted{ToolCallStarted: &convov1.ToolCallStarted{
		ToolCall: &convov1.ToolCall{Id: "c1", BlockId: "b1", Name: "calc"}, Input: input}}})
	r.apply(&convov1.Event{Kind: &convov1.Event_ToolCallFailed{ToolCallFailed: &convov1.ToolCallFailed{
		ToolCall: &convov1.ToolCall{Id: "c1", BlockId: "b1", Status: "failed"}, Error: "division by zero"}}})
	r.apply(&convov1.Event{Kind: &convov1.Event_PromptCompleted{PromptCompleted: &convov1.PromptCompleted{
		Prompt: &convov1.Prompt{Id: "p"}}}})
	want := strings.Join([]string{
		`{"type":"start","messageId":"m"}`,
		`{"type":"start-step"}`,
		`{"type":"tool-input-start","toolCallId":"b1","toolName":"calc","dynamic":true,"providerExecuted":true}`,
		`{"type":"tool-input-available","toolCallId":"b1","toolName":"calc","input":{"x":1},"dynamic":true,"providerExecuted":true}`,
		`{"type":"tool-output-error","toolCallId":"b1","errorText":"division by zero"}`,
		`{"type":"finish-step"}`,
		`{"type":"finish","finishReason":"stop"}`,
	}, "\n")
	if got := chunkLine(r.flush()); got != want {
		t.Fatalf("chunks\n%s\nwant\n%s", got, want)
	}
	if !r.done {
		t.Fatal("the reply is not done after its prompt completed")
	}
	r.apply(blockDeltaEvent("p", "b1", "late"))
	if out := r.flush(); len(out) != 0 {
		t.Fatalf("chunks after the end: %s", chunkLine(out))
	}
}

// BenchmarkUIReplyDelta measures one text delta's translation into its
// chunk, and its JSON, in a block that already holds many: the cost does
// not grow with the block (compare -bench 'UIReplyDelta/prior=').
func BenchmarkUIReplyDelta(b *testing.B) {
	for _, prior := range []int{1, 10_000, 100_000} {
		b.Run("prior="+strconv.Itoa(prior), func(b *testing.B) {
			r := newUIReply("p", "m")
			r.apply(blockStartEvent("p", "t", "text", nil))
			delta := blockDeltaEvent("p", "t", "token ")
			for range prior {
				r.apply(delta)
			}
			r.flush()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				r.apply(delta)
				for _, c := range r.flush() {
					if _, err := json.Marshal(c); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
