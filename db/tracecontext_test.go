package db_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// TestPromptTraceContext: a send whose context carries a span keeps its
// W3C trace context with the prompt it queues, and the worker that claims
// the prompt reads it in the claim (and through convo.prompt_trace, CV001
// for a worker that does not hold it); a send without one keeps none.
func TestPromptTraceContext(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	state, _ := trace.ParseTraceState("vendor=x")
	traced := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: state,
	}))
	res, err := tb.store.SendMessage(traced, conversation.SendMessageParams{OwnerID: "local", Text: "traced",
		ModelConfigs: []json.RawMessage{json.RawMessage(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
	if err != nil || len(claimed) != 1 || claimed[0].PromptID != res.PromptIDs[0] {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	var got map[string]string
	if err := json.Unmarshal(claimed[0].TraceContext, &got); err != nil {
		t.Fatalf("trace_context %s: %v", claimed[0].TraceContext, err)
	}
	if got["traceparent"] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" || got["tracestate"] != "vendor=x" {
		t.Errorf("the claim's trace_context = %v", got)
	}
	if claimed[0].QueuedSeconds < 0 || claimed[0].QueuedSeconds > 60 {
		t.Errorf("queued_seconds = %v", claimed[0].QueuedSeconds)
	}
	var again string
	if err := tb.pool.QueryRow(ctx, `SELECT trace_context->>'traceparent' FROM convo.prompt_trace($1, 'w1')`, res.PromptIDs[0]).Scan(&again); err != nil || again != got["traceparent"] {
		t.Errorf("prompt_trace: %q, %v", again, err)
	}
	_, err = tb.pool.Exec(ctx, `SELECT * FROM convo.prompt_trace($1, 'w2')`, res.PromptIDs[0])
	if sqlstate.Of(err) != sqlstate.NotFound {
		t.Errorf("prompt_trace by a worker that does not hold the prompt: %v, want CV001", err)
	}

	// No span: no trace context; the claim says {}.
	plain := tb.sendMessage(t, uuid.Nil, "untraced")
	claimed, err = tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
	if err != nil || len(claimed) != 1 || claimed[0].PromptID != plain.promptID || string(claimed[0].TraceContext) != "{}" {
		t.Fatalf("claim of the untraced prompt: %v %+v", err, claimed)
	}
}

// TestSendMessagesTraceContextRefused: convo.send_messages refuses an item
// whose trace context is not a W3C one with CV003 naming it, writing
// nothing of that item, and sends the others.
func TestSendMessagesTraceContextRefused(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	for _, bad := range []string{`not json`, `[1]`, `{"traceparent": 7}`, `{"traceparent": "00-xyz-00f067aa0ba902b7-01"}`, `{"tracestate": "a=b"}`} {
		rows, err := tb.pool.Query(ctx, `SELECT coalesce(error_code, ''), coalesce(error_message, '')
			  FROM convo.send_messages('{local,local}', '{NULL,NULL}', '{a,b}', '{"[{}]","[{}]"}', '{NULL,NULL}', '{NULL,NULL}',
			                           ARRAY[$1, '{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}'])
			 ORDER BY ord`, bad)
		if err != nil {
			t.Fatal(err)
		}
		var codes, msgs []string
		for rows.Next() {
			var code, msg string
			if err := rows.Scan(&code, &msg); err != nil {
				t.Fatal(err)
			}
			codes, msgs = append(codes, code), append(msgs, msg)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(codes) != 2 || codes[0] != "CV003" || !strings.Contains(msgs[0], "trace_contexts[1]") || codes[1] != "" {
			t.Errorf("%s: codes %q, messages %q; want CV003 naming trace_contexts[1], then sent", bad, codes, msgs)
		}
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.prompts WHERE trace_context IS NULL`); n != 0 {
		t.Errorf("%d prompts without a trace context: a refused item wrote something", n)
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.prompts`); n != 5 {
		t.Errorf("%d prompts, want the 5 sent", n)
	}
}
