package jsonlimit

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	atLimit := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	for _, tc := range []struct {
		in, want string // want: "" for accepted, else the error's text
		kind     Kind   // the refusal's Kind
	}{
		{`{"a":[1,2.5,-3e10,1.7e308,5e-324,0,-0,0.0e-999999]}`, "", 0},
		{atLimit, "", 0},
		{`"\ud83d\ude00 \u00e9"`, "", 0},
		{` true `, "", 0},
		{`{"expression": 1e400}`, "$.expression: number 1e400 is outside the range of a 64-bit float (magnitude between 5e-324 and 1.7e308, or 0)", OutOfRange},
		{`[1, -1e999999]`, "$[1]: number -1e999999 is outside the range of a 64-bit float (magnitude between 5e-324 and 1.7e308, or 0)", OutOfRange},
		{`[1e280, 99999999999999999999e280, 0.0000000000000000001e-280, 1e-0000000000000000000000000000308]`, "", 0},
		{`[1e309]`, "$[0]: number 1e309 is outside the range of a 64-bit float (magnitude between 5e-324 and 1.7e308, or 0)", OutOfRange},
		{`[0.00000000000000000000001e-310]`, "$[0]: number 0.00000000000000000000001e-310 is outside the range of a 64-bit float (magnitude between 5e-324 and 1.7e308, or 0)", OutOfRange},
		{`[1e` + strings.Repeat("0", MaxNumberLen) + `1]`, "$[0]: a number of 1003 characters (at most 1000)", LongNumber},
		{`[1e-400]`, "$[0]: number 1e-400 is outside the range of a 64-bit float (magnitude between 5e-324 and 1.7e308, or 0)", OutOfRange},
		{`{"odd key":{"n":[0,` + strings.Repeat("1", MaxNumberLen+1) + `]}}`, `$["odd key"].n[1]: a number of 1001 characters (at most 1000)`, LongNumber},
		{deep, "$" + strings.Repeat("[0]", MaxDepth) + ": nested deeper than 64 levels", TooDeep},
		{`{"a":"x\u0000"}`, `$.a: a string holds \u0000, which PostgreSQL cannot store`, Unstorable},
		{`{"\u0000":1}`, `$: a string holds \u0000, which PostgreSQL cannot store`, Unstorable},
		{`["\ud800"]`, `$[0]: a string holds an unpaired surrogate \ud800`, Unstorable},
		{`["\udc00\ud800"]`, `$[0]: a string holds an unpaired surrogate \udc00`, Unstorable},
	} {
		err := Check([]byte(tc.in))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Check(%.60s) = %q, want %q", tc.in, got, tc.want)
		}
		var refused *Error
		if errors.As(err, &refused) != (tc.kind != 0) || refused != nil && refused.Kind != tc.kind {
			t.Errorf("Check(%.60s) = %#v, want an *Error of kind %d", tc.in, err, tc.kind)
		}
	}
}

func TestCheckSyntax(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `{`, `[1,]`, `{"a" 1}`, `01`, `1.`, `1e`, `tru`, `"a`, "\"\x01\"", `[1] x`, `"\x"`, "\"\xff\""} {
		err := Check([]byte(in))
		if !IsSyntax(err) {
			t.Errorf("Check(%q) = %v, want a syntax error", in, err)
		}
	}
}

// FuzzCheck holds Check to encoding/json's idea of valid JSON (whatever
// Check accepts, encoding/json accepts), and Sanitize to the rule.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":[1,"b",null,true]}`, `1e400`, `"\ud800"`, `[[[]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		err := Check(in)
		if err == nil && !json.Valid(in) {
			t.Fatalf("Check accepted %q, which is not JSON", in)
		}
		out := Sanitize(in)
		if err == nil && string(out) != string(in) {
			t.Fatalf("Sanitize changed valid %q", in)
		}
		if !Valid(out) {
			t.Fatalf("Sanitize(%q) = %q, which the rule refuses: %v", in, out, Check(out))
		}
	})
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a":`, MaxDepth+3) + "1" + strings.Repeat("}", MaxDepth+3)
	for _, tc := range []struct{ in, want string }{
		{`{"n": 1e400, "ok": [1, 2]}`, `{"n": "[convo: unrenderable number]", "ok": [1, 2]}`},
		{`[1e-400,"x"]`, `["[convo: unrenderable number]","x"]`},
		{deep, strings.Repeat(`{"a":`, MaxDepth) + `"[convo: nested too deeply]"` + strings.Repeat("}", MaxDepth)},
		{`{"a":`, `"[convo: unrenderable JSON]"`},
	} {
		got := string(Sanitize([]byte(tc.in)))
		if got != tc.want {
			t.Errorf("Sanitize(%.40s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestCheckIsLinear: a megabyte of hostile numbers is checked in well
// under the 50 ms a request may spend. The bound is loose (a slow, shared
// machine under -race); the benchmark gives the figure.
func TestCheckIsLinear(t *testing.T) {
	t.Parallel()
	body := []byte("[" + strings.Repeat("1e999999,", 1<<20/9) + "1]")
	start := time.Now()
	err := Check(body)
	if err == nil {
		t.Fatal("accepted")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("refusing a megabyte took %s", d)
	}
}

func BenchmarkCheck(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("[")
	for sb.Len() < 1<<20 {
		sb.WriteString(`{"name":"x\u00e9y","n":12345.678e-3,"ok":true},`)
	}
	sb.WriteString("null]")
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := Check(body); err != nil {
			b.Fatal(err)
		}
	}
}
