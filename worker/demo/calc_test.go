package demo

import (
	"math"
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
		"(1 + 2":    "unexpected end of the expression at position 6",
		"foo(1)":    `unknown name "foo"`,
		"1 2":       `unexpected token Number("2") at position 3`,
		"sqrt 4":    `unexpected token Number("4")`,
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

// TestEvaluateRefusesWhatIsNotArithmetic feeds the calculator what a
// model (or a user, through it) might try: every one gets a clear error,
// quickly, and none panics.
func TestEvaluateRefusesWhatIsNotArithmetic(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		`"a" + "b"`:                     "only numbers",
		`1 == 1`:                        `"==" is not arithmetic`,
		`1 > 0 ? 2 : 3`:                 `">" is not arithmetic`,
		`not 1`:                         `"not" is not arithmetic`,
		`env`:                           `unknown name "env"`,
		`Env.HOME`:                      `unknown name "env"`,
		`[1, 2]`:                        "only numbers",
		`{a: 1}`:                        "only numbers",
		`let x = 1; x`:                  `unknown name "x"`,
		`1..9`:                          `".." is not arithmetic`,
		`len([1])`:                      "only numbers",
		`now()`:                         `unknown function "now"`,
		`sqrt(1, 2)`:                    "sqrt takes one argument, not 2",
		`sqrt`:                          "sqrt needs an argument in parentheses",
		`1 |> sqrt()`:                   "unexpected token",
		`0 % 0`:                         "modulo by zero",
		`sqrt(-1)`:                      "not a finite number",
		`10 ^ 1000`:                     "not a finite number",
		`9 ^ 9 ^ 9 ^ 9`:                 "not a finite number",
		strings.Repeat("9^", 400) + "9": "not a finite number",
		strings.Repeat("(", 65) + "1" + strings.Repeat(")", 65): "nested too deeply",
		strings.Repeat("[", 999):                                "nested too deeply",
		strings.Repeat("1+", 600) + "1":                         "longer than 1000 characters",
		``:                                                      "empty",
		`   `:                                                   "empty",
		`1e309`:                                                 "value out of range",
		`)(`:                                                    "unexpected",
	} {
		if v, err := evaluate(expr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.60q = %v, %v; want an error with %q", expr, v, err, want)
		}
	}
	// At the depth limit, nesting still works.
	deep := strings.Repeat("(", 64) + "6*7" + strings.Repeat(")", 64)
	if v, err := evaluate(deep); err != nil || v != 42 {
		t.Errorf("64 deep: %v, %v", v, err)
	}
}

// FuzzEvaluate checks that no input panics, and that every result is a
// finite number.
func FuzzEvaluate(f *testing.F) {
	for _, seed := range []string{"6 * 7", "2 ^ 3 ^ 2", "sqrt(16) + 1", "1 / 0", "((1)", "\"x\"", "1e400", "-(-(-1))", "abs(-2) % 0.5"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		v, err := evaluate(expr)
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Errorf("%q = %v without an error", expr, v)
		}
	})
}
