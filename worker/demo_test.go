package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// demoReply is what the demo model wrote for one user message, both
// rounds: reasoning, tool call, and the markdown answer.
type demoReply struct {
	reasoning, tool, args, answer string
}

// runDemo runs the demo model on text with cfg, as the runtime does: the
// first round calls a tool, whose result (computed here) the second round
// answers from.
func runDemo(t *testing.T, cfg ModelConfig, text string) demoReply {
	t.Helper()
	model := NewDemoModel(DemoOptions{TokensPerSecond: -1})
	tools := []ToolSpec{{Name: "calculator"}, {Name: "text_stats"}}
	var r demoReply
	user := Message{Role: RoleUser, Text: text}
	for ev, err := range model.Stream(context.Background(), Request{Config: cfg, Messages: []Message{user}, Tools: tools}) {
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := ev.(Part); ok {
			switch c := p.Chunk.(type) {
			case ReasoningChunk:
				r.reasoning += string(c)
			case ToolCallStart:
				r.tool += c.Name
			case ToolCallArgs:
				r.args += string(c)
			}
		}
	}
	var result string
	switch r.tool {
	case "calculator":
		var a struct{ Expression string }
		if err := json.Unmarshal([]byte(r.args), &a); err != nil {
			t.Fatalf("calculator arguments %q: %v", r.args, err)
		}
		v, err := evaluate(a.Expression)
		if err != nil {
			t.Fatal(err)
		}
		result = formatNumber(v)
	case "text_stats":
		b, _ := json.Marshal(textStats(text))
		result = string(b)
	default:
		t.Fatalf("the demo model called no known tool: %q", r.tool)
	}
	call := ToolCall{ID: "call_1", Name: r.tool, Arguments: r.args}
	msgs := []Message{user, {Role: RoleAssistant, ToolCalls: []ToolCall{call}}, {Role: RoleTool, Text: result, ToolCallID: "call_1", ToolName: r.tool}}
	for ev, err := range model.Stream(context.Background(), Request{Config: cfg, Messages: msgs, Tools: tools}) {
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := ev.(Part); ok {
			if c, ok := p.Chunk.(MessageChunk); ok {
				r.answer += string(c)
			}
		}
	}
	if r.reasoning == "" || r.answer == "" {
		t.Fatalf("the demo model wrote no reasoning or no answer: %+v", r)
	}
	return r
}

// TestDemoVoice checks that the model name and temperature change the demo
// model's answer (so an A/B comparison has two replies to compare), that
// the same configuration answers the same way, and that every
// configuration still calls a tool.
func TestDemoVoice(t *testing.T) {
	t.Parallel()
	temp := func(v float64) *float64 { return &v }
	configs := []ModelConfig{
		{},
		{Model: "small"},
		{Model: "large"},
		{Model: "small", Temperature: temp(0.2)},
		{Model: "small", Temperature: temp(1.5)},
	}
	for _, text := range []string{"What is 6 times 7?", "Write a haiku about the sea"} {
		seen := map[string]int{}
		for i, cfg := range configs {
			r := runDemo(t, cfg, text)
			if again := runDemo(t, cfg, text); again != r {
				t.Errorf("%q with %v: two runs differ:\n%q\n%q", text, cfg, r.answer, again.answer)
			}
			if j, ok := seen[r.answer]; ok {
				a, _ := json.Marshal(configs[j])
				b, _ := json.Marshal(cfg)
				t.Errorf("%q: configurations %s and %s give the same answer:\n%s", text, a, b, r.answer)
			}
			seen[r.answer] = i
		}
	}
	// The answer says which configuration wrote it.
	r := runDemo(t, ModelConfig{Model: "large", Temperature: temp(0.7)}, "What is 6 times 7?")
	if !strings.Contains(r.answer, "**large** at temperature 0.7") {
		t.Errorf("the answer does not name its model and temperature:\n%s", r.answer)
	}
}

// TestDemoEscapesUserText renders the demo's answers to HTML with a
// CommonMark + GFM renderer: what the user typed must come out as typed,
// never as emphasis, code, links or tables.
func TestDemoEscapesUserText(t *testing.T) {
	t.Parallel()
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	for _, tc := range []struct{ text, want string }{
		{"What is (2+3)*4?", "<em>What is (2+3)*4?</em>"},
		{"What is 2*3*4?", "<em>What is 2*3*4?</em>"},
		{"Is snake_case_name or *bold* or `code` a [link](x) | pipe <b>tag</b>?", "<em>Is snake_case_name or *bold* or `code` a [link](x) | pipe &lt;b&gt;tag&lt;/b&gt;?</em>"},
		{"# not a heading, __not bold__ ~~not struck~~", "<em># not a heading, __not bold__ ~~not struck~~</em>"},
	} {
		r := runDemo(t, ModelConfig{}, tc.text)
		var html bytes.Buffer
		if err := md.Convert([]byte(r.answer), &html); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(html.String(), tc.want) {
			t.Errorf("%q: the answer does not render the text as typed (%s); markdown:\n%s\nHTML:\n%s", tc.text, tc.want, r.answer, html.String())
		}
	}
}
