package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// TestCancelManyInputs cancels a reply waiting on hundreds of inputs
// (convo._fail_open_calls ends them in a batch): every pending request is
// cancelled and every open call failed, an answered request keeps its
// answer, a running call's streamed output is kept, and the log holds, call by call
// in the order the calls started, the inputAnswered and toolCallFailed a
// client folds, with the ids it needs, gap-free, then the prompt's events;
// NOTIFY is sent for the batch once, not per event. Before the cancel, a
// read shows each open call's output (read in one pass).
func TestCancelManyInputs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 500
	tb := setup(t)
	r := tb.startReply(t)
	// A call that streams output (it asks nothing): its output stays.
	streamed := tb.toolCall(t, r.promptID, "search")
	for _, part := range []string{"part 1, ", "part 2"} {
		if err := tb.api.ToolCallProgress(ctx, apiq.ToolCallProgressParams{ToolCallID: streamed, Output: part}); err != nil {
			t.Fatal(err)
		}
	}
	tb.openInputs(t, r.promptID, n)
	tb.park(t, r.promptID)

	type call struct {
		id, block     uuid.UUID
		request, kind string
	}
	var calls []call
	rows, err := tb.pool.Query(ctx, `
		SELECT t.id, t.block_id, coalesce(r.status, ''), coalesce(r.kind, '') FROM convo.tool_calls t LEFT JOIN convo.input_requests r ON r.tool_call_id = t.id
		 WHERE t.prompt_id = $1 ORDER BY t.started_at, t.id`, r.promptID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c call
		if err := rows.Scan(&c.id, &c.block, &c.request, &c.kind); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	if rows.Err() != nil || len(calls) != n+1 || calls[0].id != streamed {
		t.Fatalf("%d calls, %v; want %d, the streamed one first", len(calls), rows.Err(), n+1)
	}
	// Answered but not yet acted on: the answer stays, no inputAnswered.
	for i, c := range calls {
		if c.kind == "approval" {
			if err := tb.answer(ctx, c.id, `{"approved": true}`); err != nil {
				t.Fatal(err)
			}
			calls[i].request = "answered"
			break
		}
	}

	before := tb.state(t, r.conversationID)
	if len(before.PendingInputs) != n {
		t.Errorf("%d pending inputs before the cancel, want %d", len(before.PendingInputs), n)
	}
	outputs := map[uuid.UUID]string{}
	for _, m := range before.Messages {
		for _, b := range m.Blocks {
			if b.ToolCall != nil {
				outputs[b.ToolCall.ID] = b.ToolCall.Output
			}
		}
	}
	if len(outputs) != n+1 || outputs[streamed] != "part 1, part 2" || outputs[calls[n].id] != "" {
		t.Errorf("read before the cancel: %d calls, streamed output %q, last %q; want %d, %q, %q",
			len(outputs), outputs[streamed], outputs[calls[n].id], n+1, "part 1, part 2", "")
	}

	listener, err := tb.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Release()
	if _, err := listener.Exec(ctx, "LISTEN convo_events"); err != nil {
		t.Fatal(err)
	}

	if ok, err := tb.store.CancelPrompt(ctx, "local", r.promptID); err != nil || !ok {
		t.Fatalf("cancel = %v, %v", ok, err)
	}

	// The rows: every request cancelled but the answered one, every call
	// failed, the streamed output kept.
	var cancelled, answered, failed, kept, requests int
	if err := tb.pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE r.status = 'cancelled' AND r.answered_at IS NOT NULL AND r.answer IS NULL),
		       count(*) FILTER (WHERE r.status = 'answered' AND r.answer = '{"approved": true}'),
		       count(*) FILTER (WHERE t.status = 'failed' AND t.error = 'prompt cancelled before the tool call finished'
		                          AND t.ended_at IS NOT NULL),
		       count(*) FILTER (WHERE t.id = $2 AND t.output = 'part 1, part 2'),
		       count(r.*)
		  FROM convo.tool_calls t LEFT JOIN convo.input_requests r ON r.tool_call_id = t.id
		 WHERE t.prompt_id = $1`, r.promptID, streamed).Scan(&cancelled, &answered, &failed, &kept, &requests); err != nil {
		t.Fatal(err)
	}
	if cancelled != n-1 || answered != 1 || failed != n+1 || kept != 1 || requests != n {
		t.Errorf("after the cancel: %d requests cancelled, %d answered (of %d), %d calls failed, streamed output kept %d; want %d, 1 (of %d), %d, 1",
			cancelled, answered, requests, failed, kept, n-1, n, n+1)
	}
	after := tb.state(t, r.conversationID)
	if len(after.PendingInputs) != 0 || after.Conversation.ActivePromptID.Valid {
		t.Errorf("after the cancel: %d pending inputs, active prompt %v; want none", len(after.PendingInputs), after.Conversation.ActivePromptID)
	}

	// The log: per call, inputAnswered (when its request was pending)
	// then toolCallFailed, in the order the calls started; then the
	// prompt's events. Seqs follow on with no gap.
	events, err := tb.store.EventsAfter(ctx, r.conversationID, before.Seq, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		kind conversation.EventKind
		call call
	}
	var wants []want
	for _, c := range calls {
		if c.request == "pending" {
			wants = append(wants, want{conversation.EventInputAnswered, c})
		}
		wants = append(wants, want{conversation.EventToolCallFailed, c})
	}
	tail := []conversation.EventKind{"promptCancelled", "messageUpdated", "conversationUpdated"}
	if len(events) != len(wants)+len(tail) {
		t.Fatalf("%d events after the cancel, want %d", len(events), len(wants)+len(tail))
	}
	for i, e := range events {
		if e.Seq != before.Seq+int64(i)+1 {
			t.Fatalf("event %d has seq %d, want %d", i, e.Seq, before.Seq+int64(i)+1)
		}
		if i >= len(wants) {
			if e.Kind != tail[i-len(wants)] {
				t.Errorf("event %d is %s, want %s", i, e.Kind, tail[i-len(wants)])
			}
			continue
		}
		w := wants[i]
		if e.Kind != w.kind || e.ToolCallID.UUID != w.call.id || e.BlockID.UUID != w.call.block || e.PromptID.UUID != r.promptID {
			t.Fatalf("event %d: %s call %s block %s prompt %s; want %s call %s block %s prompt %s",
				i, e.Kind, e.ToolCallID.UUID, e.BlockID.UUID, e.PromptID.UUID, w.kind, w.call.id, w.call.block, r.promptID)
		}
		var p struct {
			ToolCallID, PromptID, Status, AnsweredAt string
			Answer                                   json.RawMessage
			Message                                  struct{ ID uuid.UUID }
			ToolCall                                 struct{ ID, Status, Output string }
			Error                                    string
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		switch w.kind {
		case conversation.EventInputAnswered:
			if p.ToolCallID != w.call.id.String() || p.PromptID != r.promptID.String() || p.Status != "cancelled" ||
				p.AnsweredAt == "" || p.Answer != nil || p.Message.ID != r.messageID {
				t.Fatalf("inputAnswered %d: %s", i, e.Payload)
			}
		case conversation.EventToolCallFailed:
			output := ""
			if w.call.id == streamed {
				output = "part 1, part 2"
			}
			if p.ToolCall.ID != w.call.id.String() || p.ToolCall.Status != "failed" || p.ToolCall.Output != output ||
				p.Error != "prompt cancelled before the tool call finished" {
				t.Fatalf("toolCallFailed %d: %s", i, e.Payload)
			}
		}
	}

	// NOTIFY: a hint per batch, the last with the conversation's last seq.
	var notes []string
	for {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		note, err := listener.Conn().WaitForNotification(wctx)
		cancel()
		if err != nil {
			break
		}
		if strings.HasPrefix(note.Payload, r.conversationID.String()+":") {
			notes = append(notes, note.Payload)
		}
	}
	last := fmt.Sprintf("%s:%d", r.conversationID, events[len(events)-1].Seq)
	if len(notes) == 0 || len(notes) > 1+len(tail) || notes[len(notes)-1] != last {
		t.Errorf("%d notifications (the last %q); want at most %d, the last %q", len(notes), notes[max(0, len(notes)-1):], 1+len(tail), last)
	}
}
