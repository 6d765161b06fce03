package postgres_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// openInputs opens n tool calls on the running prompt, each with a
// pending input request (kinds in turn: approval, client tool, question).
// The calls are made 100 to a statement: a statement is a transaction, and
// thousands of events in one transaction would make the fixture itself
// slow.
func (tb *testBundle) openInputs(t testing.TB, promptID uuid.UUID, n int) {
	t.Helper()
	for done := 0; done < n; done += 100 {
		if _, err := tb.pool.Exec(context.Background(), `
			WITH b AS (SELECT i, convo.start_block($1, 'tool_use') AS id FROM generate_series($2::int, $3::int - 1) i),
			     e AS (SELECT i, id, convo.end_block(id) FROM b),
			     c AS (SELECT i, convo.start_tool_call(e.id, 'tool_' || i, '{"n": 1}') AS id FROM e)
			SELECT convo.request_input(c.id,
			       (ARRAY['approval', 'client_tool', 'question'])[i % 3 + 1],
			       CASE i % 3 WHEN 2 THEN '{"question": "Which?"}' ELSE '{}' END::jsonb)
			  FROM c ORDER BY i`, promptID, done, min(n, done+100)); err != nil {
			t.Fatal(err)
		}
	}
}

// park parks the running prompt (wait_prompt as worker w1).
func (tb *testBundle) park(t testing.TB, promptID uuid.UUID) {
	t.Helper()
	parked, err := tb.api.PromptWait(context.Background(), apiq.PromptWaitParams{PromptID: promptID, Worker: "w1"})
	if err != nil || !parked {
		t.Fatalf("wait_prompt = %v, %v; want parked", parked, err)
	}
}

// pausedWithInputs starts a reply as worker w1, opens n tool calls on it
// with a pending input request each (openInputs), and parks it.
func (tb *testBundle) pausedWithInputs(t testing.TB, n int) reply {
	t.Helper()
	r := tb.startReply(t)
	tb.openInputs(t, r.promptID, n)
	tb.park(t, r.promptID)
	return r
}

// BenchmarkCancelManyInputs measures CancelPrompt of a waiting reply with
// 1,000 pending input requests (every one cancelled, its tool call
// failed), and a read of such a conversation (State: every message with
// its blocks and tool calls, and the pending inputs).
//
//	go test -run '^$' -bench CancelManyInputs -benchtime 5x ./postgres/
func BenchmarkCancelManyInputs(b *testing.B) {
	ctx := context.Background()
	const inputs = 1000
	b.Run("cancel", func(b *testing.B) {
		tb := setup(b)
		for b.Loop() {
			b.StopTimer()
			r := tb.pausedWithInputs(b, inputs)
			b.StartTimer()
			if ok, err := tb.store.CancelPrompt(ctx, "local", r.promptID); err != nil || !ok {
				b.Fatalf("cancel = %v, %v", ok, err)
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		tb := setup(b)
		r := tb.pausedWithInputs(b, inputs)
		for b.Loop() {
			st, err := tb.store.State(ctx, "local", r.conversationID)
			if err != nil || len(st.PendingInputs) != inputs {
				b.Fatalf("state: %d pending inputs, %v", len(st.PendingInputs), err)
			}
		}
	})
}
