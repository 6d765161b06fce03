package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/internal/jsonlimit/jsonlimittest"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// clientToolAnswer is the answer of a client tool whose output is
// output.
func clientToolAnswer(t testing.TB, output string) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(map[string]string{"output": output})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestAnswerInputHugeNumbers: a client tool's output of 1 MB of
// [1e999999, …] (each number once 72 ms of big-number arithmetic in the
// schema library) is refused at once, naming the first number, and
// changes nothing.
func TestAnswerInputHugeNumbers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	_, call := tb.paused(t, "client_tool", `{"outputSchema": {"type": "array", "items": {"type": "integer", "minimum": 0, "multipleOf": 3}}}`)
	start := time.Now()
	_, err := tb.store.AnswerInput(ctx, conversation.AnswerInputParams{OwnerID: "local", ToolCallID: call,
		Answer: clientToolAnswer(t, jsonlimittest.HugeNumbers(1<<20))})
	took := time.Since(start)
	if conversation.ErrorCode(err) != conversation.Invalid || !strings.Contains(err.Error(), "answer.output: $[0]: number") {
		t.Fatalf("AnswerInput: %v, want answer.output's first number refused", err)
	}
	// Loose: some milliseconds of work (BenchmarkAnswerInputHugeNumbers),
	// on a machine shared with other tests.
	if took > 5*time.Second {
		t.Errorf("refused in %s", took)
	}
	var status string
	if err := tb.pool.QueryRow(ctx, `SELECT status FROM convo.input_requests WHERE tool_call_id = $1`, call).Scan(&status); err != nil || status != "pending" {
		t.Errorf("request is %q (%v), want still pending", status, err)
	}
}

// BenchmarkAnswerInputHugeNumbers: the refusal of 1 MB of [1e999999, …]
// through the store, database round trip included.
func BenchmarkAnswerInputHugeNumbers(b *testing.B) {
	ctx := context.Background()
	tb := setup(b)
	_, call := tb.paused(b, "client_tool", `{"outputSchema": {"type": "array", "items": {"type": "integer", "minimum": 0}}}`)
	answer := clientToolAnswer(b, jsonlimittest.HugeNumbers(1<<20))
	b.SetBytes(int64(len(answer)))
	for b.Loop() {
		if _, err := tb.store.AnswerInput(ctx, conversation.AnswerInputParams{OwnerID: "local", ToolCallID: call, Answer: answer}); conversation.ErrorCode(err) != conversation.Invalid {
			b.Fatal(err)
		}
	}
}

// TestAnswerInputCheapChecksFirst: an answer to a request that can no
// longer be answered is refused for that, without its output being
// checked against the schema: an output the schema refuses gets "already
// answered" (or expired), not a schema error; and an output that is
// expensive to validate is refused as fast as a cheap one.
func TestAnswerInputCheapChecksFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	// Every item of a string is checked against five alternatives: a
	// 1 MB output is seconds of validation, within its budget.
	schema := `{"outputSchema": {"items": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "boolean"}, {"type": "null"},
		{"type": "object"}, {"type": "string", "minLength": 1}]}}}`
	answerInput := func(call uuid.UUID, output string) (time.Duration, error) {
		start := time.Now()
		_, err := tb.store.AnswerInput(ctx, conversation.AnswerInputParams{OwnerID: "local", ToolCallID: call, Answer: clientToolAnswer(t, output)})
		return time.Since(start), err
	}
	items := make([]string, 0, 100_000)
	for i := range cap(items) {
		items = append(items, strconv.Quote(fmt.Sprintf("item%d", i%10_000)))
	}
	expensive := "[" + strings.Join(items, ",") + "]"

	// Parked first: an answer makes its prompt claimable again, and
	// paused claims the next prompt.
	_, answered := tb.paused(t, "client_tool", schema)
	_, expired := tb.paused(t, "client_tool", schema)
	_, pending := tb.paused(t, "client_tool", schema)
	if _, err := answerInput(answered, `["ok"]`); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.pool.Exec(ctx, `UPDATE convo.input_requests SET expires_at = now() - interval '1 second' WHERE tool_call_id = $1`, expired); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]uuid.UUID{"Answered": answered, "Expired": expired} {
		_, err := answerInput(call, `[true]`) // not of the schema
		if conversation.ErrorCode(err) != conversation.FailedPrecondition {
			t.Errorf("%s: %v, want failed_precondition, not a schema error", name, err)
		}
	}

	// The same expensive output: validated on a pending request,
	// refused without validation on the answered one.
	validated, err := answerInput(pending, expensive)
	if err != nil {
		t.Fatalf("the expensive output on a pending request: %v", err)
	}
	refused, err := answerInput(answered, expensive)
	if conversation.ErrorCode(err) != conversation.FailedPrecondition || !strings.Contains(err.Error(), "already answered") {
		t.Fatalf("the expensive output on an answered request: %v", err)
	}
	t.Logf("validated in %s, refused in %s", validated, refused)
	if refused > validated/3 {
		t.Errorf("refused in %s, validated in %s: the refusal validated too", refused, validated)
	}
}

// TestAnswerInputSchemaOverBudget: a stored output schema over the
// declaration budget (one that SQL's cheap bounds let through, or one
// stored before the budget) is treated as one that does not compile: the
// output is not held to it, and no time is spent on it.
func TestAnswerInputSchemaOverBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	var defs []string
	for i := range 25 {
		defs = append(defs, fmt.Sprintf(`"d%d": {"anyOf": [{"$ref": "#/$defs/d%d"}, {"$ref": "#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, `"d25": {"type": "string"}`)
	schema := `{"outputSchema": {"$ref": "#/$defs/d0", "$defs": {` + strings.Join(defs, ", ") + `}}}`
	_, call := tb.paused(t, "client_tool", schema)
	start := time.Now()
	if _, err := tb.store.AnswerInput(ctx, conversation.AnswerInputParams{OwnerID: "local", ToolCallID: call, Answer: clientToolAnswer(t, `7`)}); err != nil {
		t.Fatalf("AnswerInput: %v, want the output accepted (the schema is not applied)", err)
	}
	// Validated, the chain is 2^25 subschemas: the budget would stop it,
	// but it is never compiled for use at all.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("answered in %s", d)
	}
}

// TestRequestInputSchemaBounds: request_input refuses an output schema
// over the bounds SQL checks cheaply, size and depth, with CV003 naming
// the limit, and asks nothing.
func TestRequestInputSchemaBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.startReply(t)
	call := tb.toolCall(t, r.promptID, "run")
	entries := make([]string, 200_000)
	for i := range entries {
		entries[i] = strconv.Itoa(i)
	}
	for name, tc := range map[string]struct{ schema, message string }{
		"Enum": {`{"enum": [` + strings.Join(entries, ",") + `]}`, "request.outputSchema is over the schema size limit"},
		"Deep": {strings.Repeat(`{"type": "array", "items": `, 40) + `{}` + strings.Repeat(`}`, 40), "request.outputSchema is over the schema depth limit"},
	} {
		err := tb.api.InputRequest(ctx, apiq.InputRequestParams{ToolCallID: call, Kind: "client_tool", Request: json.RawMessage(`{"outputSchema": ` + tc.schema + `}`)})
		if pgErr := requireSQLState(t, err, sqlstate.InvalidArgument); !strings.Contains(pgErr.Message, tc.message) {
			t.Errorf("%s: message %q, want %q", name, pgErr.Message, tc.message)
		}
	}
	// Just within: 31 levels below the schema object is accepted.
	ok := strings.Repeat(`{"items": `, 31) + `{}` + strings.Repeat(`}`, 31)
	if err := tb.api.InputRequest(ctx, apiq.InputRequestParams{ToolCallID: call, Kind: "client_tool", Request: json.RawMessage(`{"outputSchema": ` + ok + `}`)}); err != nil {
		t.Fatalf("a schema of 32 levels: %v", err)
	}
}
