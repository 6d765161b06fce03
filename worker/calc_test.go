package worker

import (
	"strings"
	"testing"
)

func TestEvaluate(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		"6 * 7":          "42",
		"(2 + 3) * 4":    "20",
		"2 ^ 3 ^ 2":      "512",
		"-2 ^ 2":         "-4",
		"10 / 4":         "2.5",
		"7 % 3":          "1",
		"sqrt(16) + 1":   "5",
		"1_000 × 3 ÷ 2":  "1500",
		"2 * pi":         "6.28318530718",
		"0.1 + 0.2":      "0.3",
		"round(2.5) - 1": "2",
	} {
		v, err := evaluate(expr)
		if err != nil || formatNumber(v) != want {
			t.Errorf("%s = %s, %v; want %s", expr, formatNumber(v), err, want)
		}
	}
	for expr, want := range map[string]string{
		"1 / 0":     "division by zero",
		"2 +":       "unexpected end",
		"(1 + 2":    "missing )",
		"foo(1)":    `unknown name "foo"`,
		"1 2":       `unexpected "2"`,
		"sqrt 4":    "needs an argument",
		"10 ^ 1000": "not a finite number",
	} {
		if _, err := evaluate(expr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", expr, err, want)
		}
	}
}

func TestFindExpression(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]string{
		"What is 6 times 7?":                  "6 * 7",
		"compute (2+3)*4, please":             "(2+3)*4",
		"What's 1,234 + 766?":                 "1234 + 766",
		"How much is 100 divided by 8?":       "100 / 8",
		"Tell me about PostgreSQL":            "",
		"I was born in 1990":                  "",
		"what is 2^10 and also 3+4 and 5*6*7": "5*6*7", // the longest
	} {
		if got := findExpression(text); got != want {
			t.Errorf("findExpression(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestTextStats(t *testing.T) {
	t.Parallel()
	st := textStats("The cat sat. The cat ran! Did the dog follow?")
	if st.Words != 10 || st.Sentences != 3 || !st.QuestionSentence || st.MostFrequent[0] != "the" || st.LongestWord != "follow" {
		t.Errorf("%+v", st)
	}
}
