package wire

import (
	"strings"
	"testing"

	"github.com/convo-dev/convo/conversation"
)

func TestCheckJSONSurrogates(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, json, field string // field "": accepted
	}{
		{"NoEscapes", `{"text":"hello ☃"}`, ""},
		{"Pair", `{"text":"\ud83d\ude00"}`, ""},
		{"PairUpperHex", `{"text":"\uD83D\uDE00"}`, ""},
		{"OtherEscapes", `{"text":"a\u00e9\n\"\\ud800\\"}`, ""},
		{"LoneHigh", `{"text":"\ud800"}`, "text"},
		{"LoneHighUpperHex", `{"text":"x\uDBFFy"}`, "text"},
		{"LoneLow", `{"text":"\udc00"}`, "text"},
		{"HighThenText", `{"text":"\ud83dx\ude00"}`, "text"},
		{"HighThenHigh", `{"text":"\ud83d\ud83d\ude00"}`, "text"},
		{"LowBeforeHigh", `{"text":"\ude00\ud83d"}`, "text"},
		{"HighAtEnd", `{"text":"\ud83d`, "text"},
		{"Nested", `{"id":"x","messages":[{"role":"user","content":"ok"},{"role":"user","content":[{"type":"text","text":"\ud800"}]}]}`,
			"messages[1].content[0].text"},
		{"AfterObjectInArray", `{"a":[{"b":1},{"c":"\udfff"}]}`, "a[1].c"},
		{"MemberName", `{"model":{"\ud800":1}}`, "model"},
		{"TopLevel", `"\ud800"`, "body"},
		{"InArrayAtTop", `["ok","\ud800"]`, "[1]"},
		{"EscapedQuoteBefore", `{"a":"\"","b":"\ud800"}`, "b"},
		{"DeepNesting", strings.Repeat("[", 100000) + `"\ud800"` + strings.Repeat("]", 100000), strings.Repeat("[0]", 100000)},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckJSONSurrogates([]byte(c.json))
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if conversation.ErrorCode(err) != conversation.Invalid || !strings.HasPrefix(conversation.ErrorMessage(err), c.field+": ") {
				t.Fatalf("got %v; want Invalid naming %.40s", err, c.field)
			}
		})
	}
}

func TestVisible(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", " \t\r\n", "\u200b", "\u200b\u200c\u200d\u2060\ufeff", "\u200e\u200f", "\u202a\u202b\u202c\u202d\u202e",
		"\u2066\u2067\u2068\u2069", "\x1b\x07\x7f", "\u0085\u00a0\u3000", "\u00ad", "\ufe0f", "\u3164\u115f", "\U000e0041",
		"\u2800", "\u2800 \u2800", "\U0001d159",
	} {
		if HasVisible(s) {
			t.Errorf("%+q: visible", s)
		}
	}
	for _, s := range []string{"a", "\u200bx", " ☃ ", "👍", "\u202e\u0645", "1", "\u2800x", "\u2801"} {
		if !HasVisible(s) {
			t.Errorf("%+q: not visible", s)
		}
	}
}

func TestCheckTitle(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		title    string
		required bool
		refused  string // "" accepted
	}{
		{"Plans", true, ""},
		{"", false, ""},
		{"", true, "is required"},
		{"a\nb", true, "control characters (U+000A at character 2)"},
		{"a\r", true, "control characters"},
		{"a\tb", true, "control characters"},
		{"\x1b[31mred", true, "control characters (U+001B"},
		{"bell\a", true, "control characters"},
		{"del\x7f", true, "control characters"},
		{"c1\u0085", true, "control characters"},
		{"two\u2028lines", true, "must not contain line or paragraph separators (U+2028 at character 4)"},
		{"two\u2029paragraphs", true, "line or paragraph separators (U+2029"},
		{"\u2800", true, "shows nothing"},
		{"\u2800 Plans", true, ""},
		{"\u200b\u200b", false, "shows nothing"},
		{"\u202e", true, "shows nothing"},
		{"   ", false, "shows nothing"},
		{"\u200bhello", true, ""},
	} {
		err := CheckTitle("title", c.title, c.required)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%+q refused: %v", c.title, err)
		case c.refused != "" && (conversation.ErrorCode(err) != conversation.Invalid ||
			!strings.HasPrefix(conversation.ErrorMessage(err), "title: ") || !strings.Contains(conversation.ErrorMessage(err), c.refused)):
			t.Errorf("%+q: %v; want Invalid naming title: %s", c.title, err, c.refused)
		}
	}
}
