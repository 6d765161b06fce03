package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres/dbq"
)

// nested is v inside depth arrays: nested(2, "1") is [[1]].
func nested(depth int, v string) string {
	return strings.Repeat("[", depth) + v + strings.Repeat("]", depth)
}

// jsonRuleCase is one SQL function argument that stores JSON from its
// caller. prepare builds what the call needs and returns the call with
// v (a JSON value, the hostile part) placed in the argument; field is
// what the CV003 message must name.
type jsonRuleCase struct {
	name, field string
	prepare     func(t *testing.T, tb *testBundle, v string) func() error
	// accepts is false where no value of v can make the call succeed
	// (the argument takes no numbers or nesting of its own), so the
	// boundary values are not tried.
	accepts bool
}

// batchErr calls write_batch with one op (JSON text, "%s" standing for
// the prompt id) and returns its refusal as the error a direct call
// would have raised.
func batchErr(tb *testBundle, number int64, op string) error {
	rows, err := tb.api.BatchWrite(context.Background(), apiq.BatchWriteParams{Worker: "w1", Batch: number, Ops: json.RawMessage("[" + op + "]")})
	if err != nil {
		return err
	}
	if len(rows) != 0 {
		return &pgconn.PgError{Code: rows[0].Code, Message: rows[0].Message}
	}
	return nil
}

func jsonRuleCases() []jsonRuleCase {
	ctx := context.Background()
	str := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	return []jsonRuleCase{
		{"start_block", "start_block: metadata", func(t *testing.T, tb *testBundle, v string) func() error {
			r := tb.startReply(t)
			return func() error {
				_, err := tb.api.BlockStart(ctx, apiq.BlockStartParams{PromptID: r.promptID, BlockType: "text", Metadata: json.RawMessage(`{"n":` + v + `}`)})
				return err
			}
		}, true},
		{"end_block", "end_block: metadata", func(t *testing.T, tb *testBundle, v string) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "text")
			return func() error {
				return tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: b, Metadata: json.RawMessage(`{"n":` + v + `}`)})
			}
		}, true},
		{"end_block_structured", "end_block: content", func(t *testing.T, tb *testBundle, v string) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "structured")
			tb.append(t, b, `{"n":`)
			tb.append(t, b, v+`}`)
			return func() error { return tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: b}) }
		}, true},
		{"start_tool_call", "start_tool_call: input", func(t *testing.T, tb *testBundle, v string) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "tool_use")
			return func() error {
				_, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: b, Name: "calc", Input: json.RawMessage(`{"expression":` + v + `}`)})
				return err
			}
		}, true},
		{"request_input", "request_input: request", func(t *testing.T, tb *testBundle, v string) func() error {
			r := tb.startReply(t)
			call := tb.toolCall(t, r.promptID, "pick")
			return func() error {
				return tb.api.InputRequest(ctx, apiq.InputRequestParams{ToolCallID: call, Kind: "client_tool",
					Request: json.RawMessage(`{"outputSchema":{"type":"array","items":{"maximum":` + v + `}}}`)})
			}
		}, true},
		{"write_batch_start_block", "start_block: metadata", func(t *testing.T, tb *testBundle, v string) func() error {
			r := tb.startReply(t)
			return func() error {
				return batchErr(tb, 1, fmt.Sprintf(`{"op":"start_block","prompt":"%s","block":"%s","type":"text","metadata":{"n":%s}}`,
					r.promptID, uuid.New(), v))
			}
		}, true},
		{"write_batch_end_block", "end_block: metadata", func(t *testing.T, tb *testBundle, v string) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "text")
			return func() error {
				return batchErr(tb, 1, fmt.Sprintf(`{"op":"end_block","prompt":"%s","block":"%s","metadata":{"n":%s}}`, r.promptID, b, v))
			}
		}, true},
		{"write_batch_start_tool_call", "start_tool_call: input", func(t *testing.T, tb *testBundle, v string) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "tool_use")
			return func() error {
				return batchErr(tb, 1, fmt.Sprintf(`{"op":"start_tool_call","prompt":"%s","block":"%s","toolCall":"%s","name":"calc","input":{"expression":%s}}`,
					r.promptID, b, uuid.New(), v))
			}
		}, true},
		{"write_batch_request_input", "request_input: request", func(t *testing.T, tb *testBundle, v string) func() error {
			r := tb.startReply(t)
			call := tb.toolCall(t, r.promptID, "pick")
			return func() error {
				return batchErr(tb, 1, fmt.Sprintf(`{"op":"request_input","prompt":"%s","toolCall":"%s","kind":"client_tool","request":{"outputSchema":{"minimum":%s}}}`,
					r.promptID, call, v))
			}
		}, true},
		{"send_message", "send_message: model_configs", func(t *testing.T, tb *testBundle, v string) func() error {
			return func() error {
				_, err := tb.api.MessageSend(ctx, apiq.MessageSendParams{OwnerID: "local", Text: "hi",
					ModelConfigs: json.RawMessage(`[{"model":"demo","temperature":` + v + `}]`)})
				return err
			}
		}, true},
		{"regenerate_reply", "regenerate_reply: model_config", func(t *testing.T, tb *testBundle, v string) func() error {
			r := tb.startReply(t)
			if err := tb.api.PromptComplete(ctx, r.promptID); err != nil {
				t.Fatal(err)
			}
			return func() error {
				_, err := tb.q.MessageRegenerate(ctx, dbq.MessageRegenerateParams{OwnerID: "local", ConversationID: r.conversationID,
					ModelConfig: json.RawMessage(`{"model":"demo","temperature":` + v + `}`)})
				return err
			}
		}, true},
		{"edit_message", "edit_message: model_config", func(t *testing.T, tb *testBundle, v string) func() error {
			r := tb.startReply(t)
			if err := tb.api.PromptComplete(ctx, r.promptID); err != nil {
				t.Fatal(err)
			}
			user := tb.state(t, r.conversationID).Messages[0].ID
			return func() error {
				_, err := tb.q.MessageEdit(ctx, dbq.MessageEditParams{OwnerID: "local", ConversationID: r.conversationID, MessageID: user,
					Text: "hello again", ModelConfig: json.RawMessage(`{"model":"demo","temperature":` + v + `}`)})
				return err
			}
		}, true},
		{"answer_input", "answer_input: answer", func(t *testing.T, tb *testBundle, v string) func() error {
			_, call := tb.paused(t, "approval", `{}`)
			return func() error { return tb.answer(ctx, call, `{"approved":true,"reason":`+v+`}`) }
		}, false},
		{"answer_input_output", "answer_input: answer.output", func(t *testing.T, tb *testBundle, v string) func() error {
			_, call := tb.paused(t, "client_tool", `{"outputSchema":{"type":"array","items":{"type":"number"}}}`)
			return func() error { return tb.answer(ctx, call, `{"output":`+str("["+v+"]")+`}`) }
		}, true},
		{"answer_input_output_no_type", "answer_input: answer.output", func(t *testing.T, tb *testBundle, v string) func() error {
			_, call := tb.paused(t, "client_tool", `{"outputSchema":{"items":{"type":"number"}}}`)
			return func() error { return tb.answer(ctx, call, `{"output":`+str(`{"n":`+v+`}`)+`}`) }
		}, true},
	}
}

// TestSQLJSONRule calls every SQL function of the worker and client APIs
// that stores JSON its caller gave (and write_batch's ops that do) with
// numbers outside float64's range and values nested past 64 levels: each
// is refused with CV003 naming the field, and nothing changes. The values
// just inside the rule (1e308, 5e-324, 64 levels in all) are stored.
func TestSQLJSONRule(t *testing.T) {
	t.Parallel()
	// The argument wraps v one level deep ({"n": v}, [v] or the like),
	// the request_input case three: the nesting is counted from there.
	hostile := map[string]struct{ v, want string }{
		"Overflow":      {"[1, 2, -1e400]", "number -1.00e+400 is outside the range of a 64-bit float"},
		"Underflow":     {"1e-400", "number 1.00e-400 is outside the range of a 64-bit float"},
		"Deep65":        {nested(64, "1"), "nested deeper than 64 levels"},
		"Deep12000":     {nested(12_000, "1"), "nested deeper than 64 levels"},
		"DeepInObjects": {strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70), "nested deeper than 64 levels"},
	}
	for _, c := range jsonRuleCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for name, h := range hostile {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					tb := setup(t)
					call := c.prepare(t, tb, h.v)
					before := tb.fingerprint(t)
					pgErr := requireSQLState(t, call(), sqlstate.InvalidArgument)
					if !strings.Contains(pgErr.Message, c.field+": ") || !strings.Contains(pgErr.Message, h.want) {
						t.Errorf("message %q; want it to name %q and say %q", pgErr.Message, c.field, h.want)
					}
					if after := tb.fingerprint(t); after != before {
						t.Errorf("the refused call changed the database:\n before %s\n after  %s", before, after)
					}
				})
			}
			if !c.accepts {
				return
			}
			// Just inside the rule: the largest and smallest float64
			// magnitudes, and nesting of 64 in all (the argument itself
			// nests 1 to 3 deep around v).
			depth := 63
			if c.name == "send_message" {
				depth = 62
			}
			inside := []string{"1.7976931348623157e308", "-5e-324", "0.0e-999", nested(depth, "1")}
			if strings.HasSuffix(c.name, "request_input") {
				// The value sits in an outputSchema, which has a depth
				// bound of its own, 32 (TestRequestInputSchemaBounds).
				inside = inside[:3]
			}
			for _, v := range inside {
				tb := setup(t)
				if err := c.prepare(t, tb, v)(); err != nil {
					t.Errorf("value %.40s…: %v; want it accepted", v, err)
				}
			}
		})
	}
}

// TestSQLJSONRuleOutputNotStorable: a client tool's output holding what
// jsonb cannot hold — a number past even numeric's range (1e999999,
// 22003), \u0000 (22P05) — is refused with CV003 naming answer.output,
// not with PostgreSQL's own SQLSTATE, whether the output schema names a
// type or not.
func TestSQLJSONRuleOutputNotStorable(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ schema, output, want string }{
		"NumericOverflow": {`{"items":{"type":"integer"}}`, "[1e999999]", "answer_input: answer.output: a number is outside the range of a 64-bit float"},
		"NulTyped":        {`{"type":"string"}`, `"\u0000"`, "answer_input: answer.output: unsupported Unicode escape sequence (JSON text must not hold \\u0000)"},
		"NulUntyped":      {`{"items":{"type":"string"}}`, `["\u0000"]`, "answer_input: answer.output: unsupported Unicode escape sequence"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			_, call := tb.paused(t, "client_tool", `{"outputSchema":`+tc.schema+`}`)
			before := tb.fingerprint(t)
			err := tb.answer(context.Background(), call, `{"output":`+strconv.Quote(tc.output)+`}`)
			if pgErr := requireSQLState(t, err, sqlstate.InvalidArgument); !strings.Contains(pgErr.Message, tc.want) {
				t.Errorf("message %q; want %q", pgErr.Message, tc.want)
			}
			if tb.fingerprint(t) != before {
				t.Error("the refused answer changed the database")
			}
		})
	}
}

// BenchmarkJSONCheck measures convo._json_check on a stored value of
// about 1 MB: 20,000 objects of 4 numbers and a string each
// ("numbers"), the same as one string ("text"), and the numbers with
// one out of range at the end ("refused"), which the check walks number
// by number. A worker's metadata or tool input is checked once, when it
// is stored.
//
//	go test -run '^$' -bench JSONCheck ./postgres/
func BenchmarkJSONCheck(b *testing.B) {
	ctx := context.Background()
	items := `string_agg('{"a":' || g || ',"b":"' || repeat('x', 20) || '","c":[1.5,2,3]}', ',')`
	for name, value := range map[string]string{
		"numbers": `('{"items":[' || ` + items + ` || ']}')::jsonb`,
		"text":    `jsonb_build_object('items', ` + items + `)`,
		"refused": `('{"items":[' || ` + items + ` || ',1e400]}')::jsonb`,
	} {
		b.Run(name, func(b *testing.B) {
			tb := setup(b)
			if _, err := tb.pool.Exec(ctx, `CREATE TABLE bench_json AS SELECT `+value+` AS v FROM generate_series(1, 20000) g`); err != nil {
				b.Fatal(err)
			}
			var size int
			if err := tb.pool.QueryRow(ctx, `SELECT length(v::text) FROM bench_json`).Scan(&size); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			for b.Loop() {
				_, err := tb.pool.Exec(ctx, `SELECT convo._json_check(v, 'metadata') FROM bench_json`)
				if (err == nil) == (name == "refused") {
					b.Fatalf("check: %v", err)
				}
			}
		})
	}
}
