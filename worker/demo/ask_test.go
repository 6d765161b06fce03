package demo

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/convo-dev/convo/worker"
)

// TestAskFitsTheMessage: the question "/ask" puts to the user comes from
// what the user wrote after the command, by fixed rules.
func TestAskFitsTheMessage(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]map[string]any{
		"/ask which fruit should I eat?":          {"question": "Which fruit do you like best?"},
		"/ask Which BOOK should I read next":      {"question": "Which book do you like best?"},
		"/ask what kind of music suits a party?":  {"question": "Which music do you like best?"},
		"/ask tea or coffee?":                     {"question": "Which do you prefer: tea or coffee?", "choices": []string{"tea", "coffee"}},
		"/ask should I eat an apple or a pear?":   {"question": "Which do you prefer: apple or pear?", "choices": []string{"apple", "pear"}},
		"/ask":                                    {"question": "Which colour do you like best?", "choices": []string{"red", "green", "blue"}},
		"/ASK me something":                       {"question": "Which colour do you like best?", "choices": []string{"red", "green", "blue"}},
		"/ask which one should I pick?":           {"question": "Before I answer “which one should I pick”: what matters most to you here?"},
		"/ask   where   should we go on holiday?": {"question": "Before I answer “where should we go on holiday”: what matters most to you here?"},
		"/ask whether or not to go":               {"question": "Before I answer “whether or not to go”: what matters most to you here?"},
	} {
		if got := askArgs(text); !reflect.DeepEqual(got, want) {
			t.Errorf("askArgs(%q) = %v; want %v", text, got, want)
		}
	}
	long := askArgs("/ask " + strings.Repeat("word ", 40))["question"].(string)
	if !strings.Contains(long, "word…”") || len([]rune(long)) > 140 {
		t.Errorf("a long message's question is not cut: %q", long)
	}
}

// TestAskCallsAskUser runs the model on "/ask which fruit should I eat?":
// it calls ask_user with the question that fits, valid against the
// tool's schema (no choices: the user answers in words).
func TestAskCallsAskUser(t *testing.T) {
	t.Parallel()
	model := NewModel(Options{TokensPerSecond: -1})
	req := worker.Request{
		Messages: []worker.Message{{Role: worker.RoleUser, Text: "/ask which fruit should I eat?"}},
		Tools:    []worker.ToolSpec{{Name: worker.AskUserName}},
	}
	var tool, args string
	for ev, err := range model.Stream(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := ev.(worker.Part); ok {
			switch c := p.Chunk.(type) {
			case worker.ToolCallStart:
				tool += c.Name
			case worker.ToolCallArgs:
				args += string(c)
			}
		}
	}
	var got struct {
		Question string   `json:"question"`
		Choices  []string `json:"choices"`
	}
	if err := json.Unmarshal([]byte(args), &got); err != nil {
		t.Fatalf("arguments %q: %v", args, err)
	}
	if tool != worker.AskUserName || got.Question != "Which fruit do you like best?" || got.Choices != nil {
		t.Errorf("called %q with %s; want ask_user asking which fruit, without choices", tool, args)
	}
}

// TestPauseAnswerHeadings: after a pause, the answer's heading says what
// happened: only a question was answered by the user.
func TestPauseAnswerHeadings(t *testing.T) {
	t.Parallel()
	voice := newDemoVoice(worker.ModelConfig{})
	for tool, want := range map[string]string{
		"publish_note":     "## Approved: the note is published\n",
		"browser_info":     "## Your browser ran browser_info\n",
		worker.AskUserName: "## Thanks for your answer\n",
	} {
		md := demoAnswer(voice, "/x", tool, "{}", `{"ok":true}`, false, 1)
		if !strings.HasPrefix(md, want) {
			t.Errorf("after %s the answer starts %q; want %q", tool, strings.SplitN(md, "\n", 2)[0], want)
		}
		if head, _, _ := strings.Cut(md, "###"); tool != worker.AskUserName && strings.Contains(head, "answer") {
			t.Errorf("after %s the answer speaks of an answer nobody gave:\n%s", tool, md)
		}
	}
}

// TestMostFrequentGrammar: one frequent word takes "comes back", several
// take "come back".
func TestMostFrequentGrammar(t *testing.T) {
	t.Parallel()
	voice := newDemoVoice(worker.ModelConfig{})
	for text, want := range map[string]string{
		"the cat and the dog":              "The word that comes back most often: *the*.",
		"the cat and the dog and the bird": "The words that come back most often: *the*, *and*.",
	} {
		b, _ := json.Marshal(textStats(text))
		if md := demoAnswer(voice, text, "text_stats", "{}", string(b), false, 1); !strings.Contains(md, want) {
			t.Errorf("%q: the answer lacks %q:\n%s", text, want, md)
		}
	}
}
