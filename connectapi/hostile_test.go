package connectapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/internal/jsonlimit/jsonlimittest"
	"github.com/convo-dev/convo/wire"
)

// integerListSchema is the ordinary output schema the attack used: a
// list of integers, whose validation turned each 1e999999 into a big
// number.
const integerListSchema = `{"outputSchema": {"type": "array", "items": {"type": "integer"}}}`

// TestHostileClientToolOutput: a client tool's output that is JSON
// breaking convo's rule for accepted JSON (numbers out of a float64's
// range, too deep, \u0000) is refused InvalidArgument naming the field
// and the value's JSONPath, before the output schema sees it, quickly,
// and nothing changes: the request is still pending, and its prompt still
// waits.
func TestHostileClientToolOutput(t *testing.T) {
	t.Parallel()
	valid := strings.Repeat("1, ", 30_000)
	for name, tc := range map[string]struct {
		output, message string
	}{
		// 1 MB, the most a Connect request holds: the attack's shape,
		// refused by the length check, before the rule reads it.
		"MegabyteOfHugeNumbers": {jsonlimittest.HugeNumbers(1_000_000), "answer.clientTool.output: is 1000000 characters long; the limit is 100000"},
		// The longest output an answer may have: refused at its first
		// number.
		"LongestOutputOfHugeNumbers": {jsonlimittest.HugeNumbers(wire.MaxInputOutput), "answer.clientTool.output: $[0]: number 1e999999 is outside the range of a 64-bit float"},
		// Valid numbers first, so the check reads the whole text.
		"HugeNumberLast":   {"[" + valid + "1e999999]", "answer.clientTool.output: $[30000]: number 1e999999 is outside the range"},
		"TinyNumber":       {"[1, 1e-999999]", "answer.clientTool.output: $[1]: number 1e-999999 is outside the range"},
		"LongNumber":       {"[" + strings.Repeat("1", 1001) + "]", "answer.clientTool.output: $[0]: a number of 1001 characters (at most 1000)"},
		"NestedTooDeep":    {strings.Repeat("[", 65) + strings.Repeat("]", 65), "answer.clientTool.output: $" + strings.Repeat("[0]", 64) + ": nested deeper than 64 levels"},
		"NULInAString":     {`["a\u0000"]`, `answer.clientTool.output: $[0]: a string holds \u0000`},
		"LoneSurrogateKey": {`{"\ud800": 1}`, `answer.clientTool.output: $: a string holds an unpaired surrogate \ud800`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			_, _, call := tb.paused(t, "client_tool", integerListSchema)
			before := tb.countRows(t)
			start := time.Now()
			_, err := answerInput(tb.client, call, clientOutput(tc.output))
			took := time.Since(start)
			if ce := requireCode(t, err, connect.CodeInvalidArgument); !strings.Contains(ce.Message(), tc.message) {
				t.Errorf("message %q does not say %q", ce.Message(), tc.message)
			}
			// Loose bound, for -race on a loaded machine (the benchmark
			// measures: some 15 ms of CPU): before the rule, 100 of these
			// numbers took 6 s to validate, and this is 100,000.
			if took > 10*time.Second {
				t.Errorf("refusing took %s", took)
			}
			if after := tb.countRows(t); after != before {
				t.Errorf("a refused answer changed something:\nbefore %s\nafter  %s", before, after)
			}
			if got := tb.claimable(t); got != "" {
				t.Errorf("a refused answer made the prompt claimable: %s", got)
			}
			// The request still takes a good answer.
			if _, err := answerInput(tb.client, call, clientOutput("[1, 2, 3]")); err != nil {
				t.Errorf("a good answer after the refused one: %v", err)
			}
		})
	}
}

// TestHostileJSONBody: a Connect request in JSON whose body breaks
// convo's rule for accepted JSON is refused InvalidArgument naming the
// value's path (protojson alone refuses 1e400 in a double field without
// saying where), and nothing changes.
func TestHostileJSONBody(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	_, _, call := tb.paused(t, "client_tool", `{}`)
	for name, tc := range map[string]struct {
		method, body, message string
	}{
		"HugeTemperature": {"SendMessage", `{"text": "hi", "model": {"temperature": 1e400}}`,
			"body: $.model.temperature: number 1e400 is outside the range of a 64-bit float"},
		"HugeLease": {"ClaimInput", `{"toolCallId": "` + call + `", "claimant": "tab", "leaseSeconds": 1e999999}`,
			"body: $.leaseSeconds: number 1e999999 is outside the range"},
		// An unknown field is dropped by the decoder, but checked first.
		"DeepUnknownField": {"SendMessage", `{"text": "hi", "x": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
			"body: $.x" + strings.Repeat("[0]", 63) + ": nested deeper than 64 levels"},
		"NULInText": {"SendMessage", `{"text": "a\u0000b"}`, `body: $.text: a string holds \u0000`},
	} {
		t.Run(name, func(t *testing.T) {
			before := tb.countRows(t)
			code, message := postJSON(t, tb.url+"/convo.v1.ConversationService/"+tc.method, tc.body)
			if code != "invalid_argument" || !strings.Contains(message, tc.message) {
				t.Errorf("got %s %q, want invalid_argument saying %q", code, message, tc.message)
			}
			if after := tb.countRows(t); after != before {
				t.Errorf("a refused request changed something:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// postJSON posts a unary Connect request in JSON and returns the error's
// code and message ("" for a success).
func postJSON(t testing.TB, url, body string) (code, message string) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusOK {
		return "", ""
	}
	var e struct{ Code, Message string }
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("status %d, body %s", res.StatusCode, raw)
	}
	return e.Code, e.Message
}

// BenchmarkHostileClientToolOutput is the cost of refusing a client
// tool's output of about 1 MB through the whole handler (Connect over
// HTTP, binary protobuf), numbers valid but for the last, so that the
// check reads all of it. cpu-ms/op counts the client's CPU too (the
// benchmark is one process).
func BenchmarkHostileClientToolOutput(b *testing.B) {
	tb := setup(b)
	_, _, call := tb.paused(b, "client_tool", integerListSchema)
	// 100 KB (the longest output an answer may have: the rule reads all
	// of it) and 1 MB (refused by the length check, before the rule).
	for _, size := range []int{100_000, 1_000_000} {
		output := "[" + strings.Repeat("1,", (size-12)/2) + "1e999999]"
		b.Run(fmt.Sprintf("%dKB", size/1000), func(b *testing.B) {
			b.SetBytes(int64(len(output)))
			before := cpuTime(b)
			for b.Loop() {
				_, err := answerInput(tb.client, call, clientOutput(output))
				if connect.CodeOf(err) != connect.CodeInvalidArgument {
					b.Fatalf("got %v", err)
				}
			}
			// CPU time, client's and server's, per request: the wall
			// time of a shared machine says less.
			b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N)/1e3, "cpu-ms/op")
		})
	}
	var status string
	if err := tb.pool.QueryRow(context.Background(), `SELECT status FROM convo.input_requests WHERE tool_call_id = $1`, call).Scan(&status); err != nil || status != "pending" {
		b.Errorf("the request is %q (%v), want still pending", status, err)
	}
}
