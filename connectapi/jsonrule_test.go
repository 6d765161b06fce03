package connectapi_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
)

// TestAnswerInputUnstorableOutput: a client tool's output that is JSON
// PostgreSQL cannot take (a number past numeric's range, SQLSTATE 22003;
// \u0000, 22P05) or that breaks convo's rule for JSON (1e400) is
// InvalidArgument naming the output, never internal, and changes
// nothing. (The Connect door refuses each before the database sees it,
// as answer.clientTool.output; postgres' TestTranslateDataException and
// TestSQLJSONRuleOutputNotStorable hold the database's own refusals.)
func TestAnswerInputUnstorableOutput(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ schema, output string }{
		"NumericOverflow":     {`{"type": "number"}`, `1e999999`},
		"NumericUnderflow":    {`{"type": "array"}`, `[1e-999999]`},
		"FloatOverflow":       {`{"type": "array"}`, `[1e400]`},
		"NulInString":         {`{"type": "string"}`, `"\u0000"`},
		"NulInKey":            {`{"type": "object"}`, `{"\u0000": 1}`},
		"NulInStringNoType":   {`{"items": {"type": "string"}}`, `["\u0000"]`},
		"OverflowInUntypedSc": {`{"items": {"type": "integer"}}`, `[1, 1e999999]`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			_, _, call := tb.paused(t, "client_tool", `{"outputSchema": `+tc.schema+`}`)
			before := tb.countRows(t)
			_, err := answerInput(tb.client, call, clientOutput(tc.output))
			if ce := requireCode(t, err, connect.CodeInvalidArgument); !strings.Contains(ce.Message(), "answer.clientTool.output: ") {
				t.Errorf("message %q does not name answer.clientTool.output", ce.Message())
			}
			if after := tb.countRows(t); after != before {
				t.Errorf("a refused answer changed something:\nbefore %s\nafter  %s", before, after)
			}
			if tb.claimable(t) != "" {
				t.Error("a refused answer made the prompt claimable")
			}
		})
	}
}
