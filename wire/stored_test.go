package wire_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/jsonlimit"
	"github.com/convo-dev/convo/wire"
)

// TestStoredValuesThatBreakTheRule: stored JSON protojson cannot decode
// (a number past float64's range, nesting past protojson's limit of
// 10,000) converts with the marked placeholders in its place, the rest
// as it is; JSON of the wrong shape still fails.
func TestStoredValuesThatBreakTheRule(t *testing.T) {
	deep := `{"deep": ` + strings.Repeat("[", 12_000) + strings.Repeat("]", 12_000) + `}`
	block := conversation.Block{ID: uuid.New(), Type: "tool_use", Metadata: []byte(`{"n": 1e400, "name": "calc"}`),
		ToolCall: &conversation.ToolCall{ID: uuid.New(), Name: "calc", Input: []byte(deep)}}
	b, err := wire.Block(block)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.GetMetadata().GetFields()["n"].GetStringValue(); got != jsonlimit.PlaceholderNumber {
		t.Errorf("metadata.n = %q, want the number placeholder", got)
	}
	if got := wire.MetadataString(b.GetMetadata(), "name"); got != "calc" {
		t.Errorf("metadata.name = %q, want calc (the rest as it is)", got)
	}
	in, err := protojson.Marshal(b.GetToolCall().GetInput())
	if err != nil || !strings.Contains(string(in), jsonlimit.PlaceholderDeep) {
		t.Errorf("input = %.200s (%v), want the depth placeholder", in, err)
	}

	e, err := wire.Event(conversation.Event{Seq: 3, Kind: conversation.EventToolCallStarted,
		Payload: []byte(`{"toolCall": {"id": "x", "name": "calc", "input": {"expression": -1e400}}, "input": {"expression": -1e400}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.GetToolCallStarted().GetInput().GetStructValue().GetFields()["expression"].GetStringValue(); got != jsonlimit.PlaceholderNumber {
		t.Errorf("event input.expression = %q, want the number placeholder", got)
	}

	// A model configuration is typed: a member that does not decode is
	// left out, the others kept.
	side := conversation.ComparisonSide{PromptID: uuid.New(), MessageID: uuid.New(), ModelConfig: []byte(`{"model": "m", "temperature": 1e400, "maxTokens": "many"}`)}
	c, err := wire.Comparison(conversation.Comparison{ID: uuid.New(), A: side, B: side})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := c.GetA().GetModelConfig(); cfg.GetModel() != "m" || cfg.Temperature != nil || cfg.MaxTokens != nil {
		t.Errorf("model config = %v, want model m alone", cfg)
	}

	// JSON that keeps the rule but has the wrong shape is an error, as
	// before.
	if _, err := wire.Block(conversation.Block{ID: uuid.New(), Metadata: []byte(`[1]`)}); err == nil {
		t.Error("metadata that is not an object converted")
	}
}
