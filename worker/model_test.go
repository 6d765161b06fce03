package worker

import (
	"context"
	"encoding/json"
	"github.com/convo-dev/convo/worker/internal/wdb"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestParseModelConfig(t *testing.T) {
	t.Parallel()
	c, err := ParseModelConfig(json.RawMessage(`{"provider":"openai","model":"m","temperature":0.5,"max_tokens":100,"systemPrompt":"s","unknown":1}`))
	if err != nil || c.Provider != "openai" || c.Model != "m" || *c.Temperature != 0.5 || *c.MaxTokens != 100 || c.SystemPrompt != "s" {
		t.Errorf("%+v %v", c, err)
	}
	if c, err := ParseModelConfig(nil); err != nil || c.Provider != "" {
		t.Errorf("empty: %+v %v", c, err)
	}
	for raw, want := range map[string]string{
		`[]`:                  "not a JSON object",
		`{"temperature":"x"}`: "temperature",
		`{"maxTokens":0}`:     "maxTokens must be positive",
	} {
		if _, err := ParseModelConfig(json.RawMessage(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}

func TestModelsResolve(t *testing.T) {
	t.Parallel()
	silent := ModelFunc(func(context.Context, Request) iter.Seq2[Event, error] { return func(func(Event, error) bool) {} })
	ms := NewModels("demo")
	ms.Register("demo", silent, "")
	ms.Register("openai", silent, "gpt-default")
	for _, tc := range []struct{ in, provider, model string }{
		{`{}`, "demo", ""},
		{`{"model":"demo"}`, "demo", ""},
		{`{"model":"openai"}`, "openai", "gpt-default"},
		{`{"provider":"openai"}`, "openai", "gpt-default"},
		{`{"provider":"openai","model":"x"}`, "openai", "x"},
		{`{"model":"some-model"}`, "demo", "some-model"},
	} {
		c, _ := ParseModelConfig(json.RawMessage(tc.in))
		_, got, err := ms.Resolve(c)
		if err != nil || got.Provider != tc.provider || got.Model != tc.model {
			t.Errorf("%s: %s/%s %v, want %s/%s", tc.in, got.Provider, got.Model, err, tc.provider, tc.model)
		}
	}
	if _, _, err := ms.Resolve(ModelConfig{Provider: "x"}); err == nil || !strings.Contains(err.Error(), "demo, openai") {
		t.Errorf("unknown provider: %v", err)
	}
	if err := ms.SetDefault("x"); err == nil || ms.Default() != "demo" {
		t.Errorf("SetDefault of an unknown provider: %v, default %s", err, ms.Default())
	}
	if err := ms.SetDefault("openai"); err != nil || ms.Default() != "openai" {
		t.Errorf("SetDefault: %v, default %s", err, ms.Default())
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	models := NewModels("m")
	models.Register("m", ModelFunc(func(context.Context, Request) iter.Seq2[Event, error] { return func(func(Event, error) bool) {} }), "")
	c, err := Config{Models: models}.withDefaults()
	if err != nil || c.LeaseSeconds != 30 || c.HeartbeatInterval != 10*time.Second || c.BatchInterval != 20*time.Millisecond ||
		c.Tools == nil || len(c.Tools.Specs()) != 0 || c.Name == "" {
		t.Errorf("%+v %v", c, err)
	}
	for _, bad := range []Config{{}, {Workers: -1, Models: models}, {LeaseSeconds: 4000, Models: models}, {LeaseSeconds: 3, HeartbeatInterval: 3 * time.Second, Models: models}, {Models: NewModels("none")},
		{Workers: 2, ReservedSlots: 3, Models: models}, {Workers: 2, ReservedSlots: -1, Models: models}} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestHistoryMessages(t *testing.T) {
	t.Parallel()
	user, asst := uuid.New(), uuid.New()
	call1, call2 := uuid.New(), uuid.New()
	str := func(s string) *string { return &s }
	rows := []wdb.WorkerReplyRow{
		{MessageID: user, Role: "user", BlockType: "text", Content: "What is 6*7?"},
		{MessageID: asst, Role: "assistant", BlockType: "text", Content: "Let me see."},
		{MessageID: asst, Role: "assistant", BlockType: "tool_use", Content: `{"expression":"6*7"}`,
			ToolCallID: uuid.NullUUID{UUID: call1, Valid: true}, ToolName: str("calculator"), ToolInput: json.RawMessage(`{"expression": "6*7"}`), ToolOutput: str("evaluating 42")},
		// A result linked by metadata.
		{MessageID: asst, Role: "assistant", BlockType: "tool_result", Content: "42", Metadata: json.RawMessage(`{"toolCallId":"` + call1.String() + `"}`)},
		{MessageID: asst, Role: "assistant", BlockType: "text", Content: "It is 42. "},
		// A failed call without a result block, with arguments that were not JSON.
		{MessageID: asst, Role: "assistant", BlockType: "tool_use", Content: `{"x`,
			ToolCallID: uuid.NullUUID{UUID: call2, Valid: true}, ToolName: str("calculator"), ToolInput: json.RawMessage(`"{\"x"`), ToolError: str("invalid argument JSON")},
		{MessageID: asst, Role: "assistant", BlockType: "text", Content: "Sorry."},
	}
	got := historyMessages(rows, nil, nil)
	var b strings.Builder
	for _, m := range got {
		b.WriteString(string(m.Role) + ":" + m.Text)
		for _, c := range m.ToolCalls {
			b.WriteString(" [" + c.Name + " " + c.Arguments + "]")
		}
		if m.ToolCallID != "" {
			b.WriteString(" (answers " + map[string]string{call1.String(): "call1", call2.String(): "call2"}[m.ToolCallID] + ")")
		}
		b.WriteString("\n")
	}
	want := `user:What is 6*7?
assistant:Let me see. [calculator {"expression": "6*7"}]
tool:42 (answers call1)
assistant:It is 42.  [calculator {"x]
tool:error: invalid argument JSON (answers call2)
assistant:Sorry.
`
	if b.String() != want {
		t.Errorf("history:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestHistoryMessagesFiles checks that each user message gets its files,
// and that a message of files only (no row in the context) is placed by
// its position among the others.
func TestHistoryMessagesFiles(t *testing.T) {
	t.Parallel()
	u1, a1, u2, a2, u3 := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	rows := []wdb.WorkerReplyRow{
		{MessageID: u1, MessagePosition: 1, Role: "user", BlockType: "text", Content: "see the notes"},
		{MessageID: a1, MessagePosition: 2, Role: "assistant", BlockType: "text", Content: "seen"},
		{MessageID: a2, MessagePosition: 4, Role: "assistant", BlockType: "text", Content: "a picture"},
	}
	files := map[uuid.UUID][]File{
		u1: {{Filename: "notes.txt"}},
		u2: {{Filename: "photo.png"}, {Filename: "scan.pdf"}},
		u3: {{Filename: "last.csv"}},
	}
	got := historyMessages(rows, files, map[uuid.UUID]int64{u1: 1, u2: 3, u3: 5})
	var b strings.Builder
	for _, m := range got {
		b.WriteString(string(m.Role) + ":" + m.Text)
		for _, f := range m.Files {
			b.WriteString(" [" + f.Filename + "]")
		}
		b.WriteString("\n")
	}
	want := "user:see the notes [notes.txt]\nassistant:seen\nuser: [photo.png] [scan.pdf]\nassistant:a picture\nuser: [last.csv]\n"
	if b.String() != want {
		t.Errorf("history:\n%s\nwant:\n%s", b.String(), want)
	}
}
