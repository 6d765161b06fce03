package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/convo-dev/convo/worker"
)

// demoReply is what the demo model wrote for one user message, both
// rounds: reasoning, tool call, and the markdown answer.
type demoReply struct {
	reasoning, tool, args, answer string
}

// runDemo runs the demo model on text with cfg, as the runtime does: the
// first round calls a tool, whose result (computed here) the second round
// answers from.
func runDemo(t *testing.T, cfg worker.ModelConfig, text string) demoReply {
	t.Helper()
	model := NewModel(Options{TokensPerSecond: -1})
	tools := []worker.ToolSpec{{Name: "calculator"}, {Name: "text_stats"}}
	var r demoReply
	user := worker.Message{Role: worker.RoleUser, Text: text}
	for ev, err := range model.Stream(context.Background(), worker.Request{Config: cfg, Messages: []worker.Message{user}, Tools: tools}) {
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := ev.(worker.Part); ok {
			switch c := p.Chunk.(type) {
			case worker.ReasoningChunk:
				r.reasoning += string(c)
			case worker.ToolCallStart:
				r.tool += c.Name
			case worker.ToolCallArgs:
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
	call := worker.ToolCall{ID: "call_1", Name: r.tool, Arguments: r.args}
	msgs := []worker.Message{user, {Role: worker.RoleAssistant, ToolCalls: []worker.ToolCall{call}}, {Role: worker.RoleTool, Text: result, ToolCallID: "call_1", ToolName: r.tool}}
	for ev, err := range model.Stream(context.Background(), worker.Request{Config: cfg, Messages: msgs, Tools: tools}) {
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := ev.(worker.Part); ok {
			if c, ok := p.Chunk.(worker.MessageChunk); ok {
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
	configs := []worker.ModelConfig{
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
	r := runDemo(t, worker.ModelConfig{Model: "large", Temperature: temp(0.7)}, "What is 6 times 7?")
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
		r := runDemo(t, worker.ModelConfig{}, tc.text)
		var html bytes.Buffer
		if err := md.Convert([]byte(r.answer), &html); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(html.String(), tc.want) {
			t.Errorf("%q: the answer does not render the text as typed (%s); markdown:\n%s\nHTML:\n%s", tc.text, tc.want, r.answer, html.String())
		}
	}
}

// TestDemoWithoutTools runs the demo model with no tools to call: it
// reasons, then answers in the same round, in an item of its own (an
// item is never written after its flush).
func TestDemoWithoutTools(t *testing.T) {
	t.Parallel()
	model := NewModel(Options{TokensPerSecond: -1})
	flushed := map[int]bool{}
	var answer string
	var finish worker.FinishReason
	req := worker.Request{Messages: []worker.Message{{Role: worker.RoleUser, Text: "What is 6 times 7?"}}}
	for ev, err := range model.Stream(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev := ev.(type) {
		case worker.Part:
			if flushed[ev.Index] {
				t.Fatalf("part for item %d after its flush", ev.Index)
			}
			if c, ok := ev.Chunk.(worker.MessageChunk); ok {
				answer += string(c)
			}
			if _, ok := ev.Chunk.(worker.ToolCallStart); ok {
				t.Fatal("called a tool it was not given")
			}
		case worker.Flush:
			flushed[ev.Index] = true
		case worker.Finish:
			finish = ev.Reason
		}
	}
	if finish != worker.FinishStop || !strings.Contains(answer, "You wrote 5 words") || len(flushed) != 2 {
		t.Errorf("finish %q, %d items, answer:\n%s", finish, len(flushed), answer)
	}
}

// TestPauseTrigger: a command at the start of the message, any case;
// the same words anywhere else do nothing.
func TestPauseTrigger(t *testing.T) {
	for text, want := range map[string]string{
		"/approve this note":             "publish_note",
		"  /APPROVE":                     "publish_note",
		"/client-tool":                   "browser_info",
		"/ask me something":              "ask_user",
		"Please approve this":            "",
		"Can I ask you something?":       "",
		"try the client tool":            "",
		"/approved":                      "",
		"What is 6 times 7? /ask":        "",
		"clientele tooling is unrelated": "",
	} {
		if got := pauseTrigger(text); got != want {
			t.Errorf("pauseTrigger(%q) = %q, want %q", text, got, want)
		}
	}
}
