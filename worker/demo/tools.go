package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"

	"github.com/convo-dev/convo/worker"
)

// Tools returns the tools the demo model calls: calculator and
// text_stats, which compute their results (neither needs the network),
// and the three that pause the reply for the user: publish_note (needs
// approval), browser_info (a client tool) and ask_user.
func Tools() *worker.Tools {
	ts, err := worker.NewTools(CalculatorTool(), TextStatsTool(), PublishNoteTool(), BrowserInfoTool(), worker.AskUser())
	if err != nil {
		panic(err) // the demo tools are valid by construction
	}
	return ts
}

// CalculatorTool evaluates an arithmetic expression.
func CalculatorTool() worker.Tool {
	type args struct {
		Expression string `json:"expression"`
	}
	return worker.NewTool("calculator",
		"Evaluates an arithmetic expression: + - * / % ^, parentheses, sqrt, abs, round, ln, log10, sin, cos, tan, pi, e.",
		json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string","minLength":1,"description":"the expression, for example (3 + 4) * 2"}},"required":["expression"],"additionalProperties":false}`),
		func(ctx context.Context, in args, progress io.Writer) (string, error) {
			fmt.Fprintf(progress, "evaluating %s … ", in.Expression)
			v, err := evaluate(in.Expression)
			if err != nil {
				return "", fmt.Errorf("cannot evaluate %q: %w", in.Expression, err)
			}
			return formatNumber(v), nil
		})
}

// PublishNoteTool "publishes" a note: it only echoes it, but every call
// needs the user's approval first, so it shows an approval in the demo.
func PublishNoteTool() worker.Tool {
	type args struct {
		Note string `json:"note"`
	}
	t := worker.NewTool("publish_note",
		"Publishes a note for everyone to read. The user must approve each call.",
		json.RawMessage(`{"type":"object","properties":{"note":{"type":"string","minLength":1,"description":"the note's text"}},"required":["note"],"additionalProperties":false}`),
		func(ctx context.Context, in args, progress io.Writer) (string, error) {
			return fmt.Sprintf("published a note of %d characters", len([]rune(in.Note))), nil
		})
	t.NeedsApproval = true
	return t
}

// BrowserInfoTool is a client tool: the browser answers with its time,
// time zone and language, as a JSON object.
func BrowserInfoTool() worker.Tool {
	return worker.Tool{
		Name:         "browser_info",
		Description:  "Asks the user's browser for its local time, time zone and language. The browser runs it.",
		Parameters:   json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"time":{"type":"string"},"timeZone":{"type":"string"},"language":{"type":"string"}}}`),
	}
}

// TextStatsTool counts the words, sentences and characters of a text.
func TextStatsTool() worker.Tool {
	type args struct {
		Text string `json:"text"`
	}
	return worker.NewTool("text_stats",
		"Counts the words, sentences and characters of a text and finds its longest and most frequent words.",
		json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"the text to analyse"}},"required":["text"],"additionalProperties":false}`),
		func(ctx context.Context, in args, progress io.Writer) (string, error) {
			fmt.Fprintf(progress, "reading %d characters … ", len([]rune(in.Text)))
			st := textStats(in.Text)
			b, err := json.Marshal(st)
			if err != nil {
				return "", err
			}
			return string(b), nil
		})
}

// textStatistics is text_stats' result.
type textStatistics struct {
	Characters       int      `json:"characters"`
	Letters          int      `json:"letters"`
	Words            int      `json:"words"`
	Sentences        int      `json:"sentences"`
	LongestWord      string   `json:"longestWord,omitempty"`
	MostFrequent     []string `json:"mostFrequent,omitempty"`
	ReadingSeconds   int      `json:"readingSeconds"`
	QuestionSentence bool     `json:"isQuestion"`
}

func textStats(text string) textStatistics {
	st := textStatistics{Characters: len([]rune(text))}
	counts := map[string]int{}
	for _, r := range text {
		if unicode.IsLetter(r) {
			st.Letters++
		}
	}
	words := strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' && r != '-'
	})
	for _, w := range words {
		w = strings.Trim(w, "'-")
		if w == "" {
			continue
		}
		st.Words++
		if len([]rune(w)) > len([]rune(st.LongestWord)) {
			st.LongestWord = w
		}
		counts[strings.ToLower(w)]++
	}
	inSentence := false
	for _, r := range text {
		switch {
		case r == '.' || r == '!' || r == '?':
			if inSentence {
				st.Sentences++
			}
			inSentence = false
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			inSentence = true
		}
	}
	if inSentence {
		st.Sentences++
	}
	st.QuestionSentence = strings.HasSuffix(strings.TrimSpace(text), "?")
	type wc struct {
		w string
		n int
	}
	var ranked []wc
	for w, n := range counts {
		ranked = append(ranked, wc{w, n})
	}
	sort.Slice(ranked, func(i, j int) bool {
		if ranked[i].n != ranked[j].n {
			return ranked[i].n > ranked[j].n
		}
		return ranked[i].w < ranked[j].w
	})
	// Words that appear more than once, at most three.
	for i := 0; i < len(ranked) && i < 3 && ranked[i].n > 1; i++ {
		st.MostFrequent = append(st.MostFrequent, ranked[i].w)
	}
	// About 230 words a minute, rounded up to a second.
	st.ReadingSeconds = (st.Words*60 + 229) / 230
	return st
}
