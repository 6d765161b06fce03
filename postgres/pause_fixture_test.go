package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres/dbq"
)

// The pauses the store's tests start: a prompt whose tool call asks for
// input and waits (db/pause_test.go, the SQL API's tests, has the same).

// toolCall starts, on a running prompt, a tool_use block (ended) and a
// tool call on it, and returns the call's id.
func (tb *testBundle) toolCall(t testing.TB, promptID uuid.UUID, name string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	block := tb.startBlock(t, promptID, "tool_use")
	if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: block}); err != nil {
		t.Fatal(err)
	}
	call, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: block, Name: name, Input: json.RawMessage(`{"path":"notes.txt"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return call
}

// requestInput asks for input of kind on the call.
func (tb *testBundle) requestInput(t testing.TB, call uuid.UUID, kind, request string) {
	t.Helper()
	if err := tb.api.InputRequest(context.Background(), apiq.InputRequestParams{ToolCallID: call, Kind: kind, Request: json.RawMessage(request)}); err != nil {
		t.Fatalf("request_input: %v", err)
	}
}

// paused starts a reply as worker w1, asks for input of kind on a tool
// call of it, and parks it (wait_prompt).
func (tb *testBundle) paused(t testing.TB, kind, request string) (reply, uuid.UUID) {
	t.Helper()
	r := tb.startReply(t)
	call := tb.toolCall(t, r.promptID, "delete_file")
	tb.requestInput(t, call, kind, request)
	parked, err := tb.api.PromptWait(context.Background(), apiq.PromptWaitParams{PromptID: r.promptID, Worker: "w1"})
	if err != nil || !parked {
		t.Fatalf("wait_prompt = %v, %v; want parked", parked, err)
	}
	return r, call
}

func (tb *testBundle) answer(ctx context.Context, call uuid.UUID, answer string) error {
	_, err := tb.q.InputAnswer(ctx, dbq.InputAnswerParams{OwnerID: "local", ToolCallID: call, Answer: json.RawMessage(answer)})
	return err
}

// promptRow is what the queue knows of a prompt.
type promptRow struct {
	Status   string
	Waiting  bool
	Worker   *string
	Lease    *time.Time
	Attempts int32
	// Held: the fair slots count it as held by its owner; OwnerWaits:
	// its owner waits in convo.owner_queue.
	Held, OwnerWaits bool
}

func (tb *testBundle) promptRow(t testing.TB, id uuid.UUID) promptRow {
	t.Helper()
	var p promptRow
	err := tb.pool.QueryRow(context.Background(), `
		SELECT p.status, p.waiting, p.worker, p.lease_expires_at, p.attempts,
		       p.status = 'running' OR (p.status = 'queued' AND p.worker IS NOT NULL),
		       coalesce((SELECT q.waiting_since IS NOT NULL FROM convo.owner_queue q WHERE q.owner_id = p.owner_id), false)
		  FROM convo.prompts p WHERE p.id = $1`, id).
		Scan(&p.Status, &p.Waiting, &p.Worker, &p.Lease, &p.Attempts, &p.Held, &p.OwnerWaits)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
