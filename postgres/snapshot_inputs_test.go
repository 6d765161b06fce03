package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/convo-dev/convo/conversation"
)

// TestRecentStateBoundsPendingInputs: a reply with 100 client tools
// answered with outputs of 100,000 characters (repeated, so that they
// compress to almost nothing in the table) made every snapshot carry
// some 10 MB of answers, whatever CONVO_SNAPSHOT_BYTES said. The open
// requests now count in the snapshot's budget: every one is there with
// its status, and an answered one's answer only while the budget lasts.
// The whole state (State) still carries every answer.
func TestRecentStateBoundsPendingInputs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.startReply(t)
	const requests = 100
	output, err := json.Marshal(map[string]string{"output": strings.Repeat("x", 100_000)})
	if err != nil {
		t.Fatal(err)
	}
	for range requests {
		call := tb.toolCall(t, r.promptID, "read_page")
		tb.requestInput(t, call, "client_tool", `{}`)
		if err := tb.answer(ctx, call, string(output)); err != nil {
			t.Fatal(err)
		}
	}

	const budget = 256 << 10
	st, err := tb.store.RecentState(ctx, "local", r.conversationID, budget)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.PendingInputs) != requests {
		t.Fatalf("%d pending inputs; want every one of the %d open requests", len(st.PendingInputs), requests)
	}
	size, withAnswer := 0, 0
	for i, in := range st.PendingInputs {
		if in.Status != conversation.InputAnswered || in.AnsweredAt == nil {
			t.Errorf("request %d: status %s, answered at %v; want answered, with its time", i, in.Status, in.AnsweredAt)
		}
		size += len(in.Request) + len(in.Answer)
		if in.Answer != nil {
			if i != withAnswer {
				t.Errorf("request %d carries its answer after one that did not: answers are left out from the first that does not fit on", i)
			}
			withAnswer++
		}
	}
	if size > budget {
		t.Errorf("the snapshot's pending inputs hold %d KB; want at most the budget, %d KB", size>>10, budget>>10)
	}
	if withAnswer == 0 || withAnswer == requests {
		t.Errorf("%d of %d answers in the snapshot; want the first ones, that fit %d KB", withAnswer, requests, budget>>10)
	}
	t.Logf("snapshot: %d requests, %d with their answer, %d KB", requests, withAnswer, size>>10)

	// A budget the messages spend alone leaves no answer in.
	st, err = tb.store.RecentState(ctx, "local", r.conversationID, 4096)
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range st.PendingInputs {
		if in.Answer != nil {
			t.Fatalf("request %d carries its answer in a snapshot of 4096 bytes", i)
		}
	}

	whole := tb.state(t, r.conversationID)
	for i, in := range whole.PendingInputs {
		if len(in.Answer) < 100_000 {
			t.Fatalf("State: request %d's answer is %d bytes; want the whole answer", i, len(in.Answer))
		}
	}

	// The answer's size is what the table says, whatever its compression.
	var answerBytes int64
	if err := tb.pool.QueryRow(ctx, `SELECT max(answer_bytes) FROM convo.input_requests WHERE prompt_id = $1`, r.promptID).Scan(&answerBytes); err != nil {
		t.Fatal(err)
	}
	if answerBytes < 100_000 {
		t.Errorf("answer_bytes = %d; want the answer's JSON text, over 100,000 bytes", answerBytes)
	}
}
