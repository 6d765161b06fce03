package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// batchOp is one op of convo.write_batch.
type batchOp map[string]any

// writeBatch calls write_batch as worker w1.
func (tb *testBundle) writeBatch(t testing.TB, number int64, ops ...batchOp) ([]apiq.BatchWriteRow, error) {
	t.Helper()
	encoded, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	return tb.api.BatchWrite(context.Background(), apiq.BatchWriteParams{Worker: "w1", Batch: number, Ops: encoded})
}

func appendOp(r reply, block uuid.UUID, text string, seq int) batchOp {
	return batchOp{"op": "append", "prompt": r.promptID, "block": block, "text": text, "seq": seq}
}

// blockContent is the block's text, streaming or not, as GetConversation
// tells it.
func (tb *testBundle) blockContent(t testing.TB, r reply, block uuid.UUID) (string, conversation.BlockStatus) {
	t.Helper()
	for _, m := range tb.state(t, r.conversationID).Messages {
		for _, b := range m.Blocks {
			if b.ID == block {
				return b.Content, b.Status
			}
		}
	}
	t.Fatalf("block %s not found", block)
	return "", ""
}

func TestWriteBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RefusedRepliesDoNotFailTheOthers", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		fine, cancelled, deleted, illegal := tb.startReply(t), tb.startReply(t), tb.startReply(t), tb.startReply(t)
		if _, err := tb.store.CancelPrompt(ctx, "local", cancelled.promptID); err != nil {
			t.Fatal(err)
		}
		cancelledBlock := uuid.New()
		if err := tb.store.DeleteConversation(ctx, "local", deleted.conversationID); err != nil {
			t.Fatal(err)
		}
		open, ended := tb.startBlock(t, illegal.promptID, "text"), tb.startBlock(t, illegal.promptID, "reasoning")
		if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: ended}); err != nil {
			t.Fatal(err)
		}
		block := uuid.New()
		rows, err := tb.writeBatch(t, 1,
			batchOp{"op": "start_block", "prompt": fine.promptID, "block": block, "type": "text"}, // 0
			batchOp{"op": "start_block", "prompt": cancelled.promptID, "block": cancelledBlock, "type": "text"},
			appendOp(deleted, uuid.New(), "gone", 1), // 2
			appendOp(illegal, open, "kept", 1),
			appendOp(illegal, ended, "refused", 1), // 4
			appendOp(fine, block, "hello", 1),
			batchOp{"op": "end_block", "prompt": illegal.promptID, "block": open}, // 6
			appendOp(fine, block, " world", 2),
			batchOp{"op": "end_block", "prompt": fine.promptID, "block": block, "metadata": map[string]any{"done": true}},
		)
		if err != nil {
			t.Fatal(err)
		}
		got := map[uuid.UUID]apiq.BatchWriteRow{}
		for _, r := range rows {
			got[r.PromptID] = r
		}
		for _, want := range []struct {
			r     reply
			index int32
			code  string
			text  string
		}{
			{cancelled, 1, sqlstate.IllegalState, "is cancelled, not running"},
			{deleted, 2, sqlstate.NotFound, "does not exist"},
			{illegal, 4, sqlstate.IllegalState, "has ended"},
		} {
			r, ok := got[want.r.promptID]
			if !ok || r.OpIndex != want.index || r.Code != want.code || !strings.Contains(r.Message, want.text) {
				t.Errorf("refusal of prompt %s: %+v, want op %d, %s, %q", want.r.promptID, r, want.index, want.code, want.text)
			}
		}
		if len(rows) != 3 {
			t.Errorf("%d refusals, want 3: %+v", len(rows), rows)
		}
		if text, status := tb.blockContent(t, fine, block); text != "hello world" || status != conversation.BlockCompleted {
			t.Errorf("the reply in the same batch: %q %s, want %q completed", text, status, "hello world")
		}
		// The refused reply's ops before the refused one were applied,
		// none after it.
		if text, status := tb.blockContent(t, illegal, open); text != "kept" || status != conversation.BlockStreaming {
			t.Errorf("the refused reply's open block: %q %s, want %q still streaming", text, status, "kept")
		}
		for _, e := range tb.events(t, cancelled.conversationID) {
			if e.Kind == conversation.EventBlockStart {
				t.Errorf("the cancelled reply got a block")
			}
		}
	})

	t.Run("SameBatchAgainAppliesNothing", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		block := tb.startBlock(t, r.promptID, "text")
		ops := []batchOp{appendOp(r, block, "once", 1), batchOp{"op": "append", "prompt": r.promptID, "block": uuid.New(), "text": "x", "seq": 1}}
		first, err := tb.writeBatch(t, 7, ops...)
		if err != nil || len(first) != 1 {
			t.Fatalf("first call: %+v %v", first, err)
		}
		// The same batch again (its answer was lost): the same answer.
		again, err := tb.writeBatch(t, 7, ops...)
		if err != nil || !slices.Equal(again, first) {
			t.Fatalf("the same batch again: %+v %v, want %+v", again, err, first)
		}
		// Under a new number, delta_seq still keeps the append once.
		if _, err := tb.writeBatch(t, 8, ops[0]); err != nil {
			t.Fatal(err)
		}
		if text, _ := tb.blockContent(t, r, block); text != "once" {
			t.Errorf("text %q, want %q", text, "once")
		}
		before := tb.fingerprint(t)
		_, err = tb.writeBatch(t, 6, appendOp(r, block, "late", 2))
		if pgErr := requireSQLState(t, err, sqlstate.IllegalState); !strings.Contains(pgErr.Message, "applied already") {
			t.Errorf("an older batch: %s", pgErr.Message)
		}
		if tb.fingerprint(t) != before {
			t.Error("an older batch changed something")
		}
	})

	t.Run("OneNotificationPerConversation", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		a, b := tb.startReply(t), tb.startReply(t)
		blockA, blockB := tb.startBlock(t, a.promptID, "text"), tb.startBlock(t, b.promptID, "text")
		conn, err := pgx.Connect(ctx, tb.pool.Config().ConnConfig.ConnString())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "LISTEN convo_events"); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.writeBatch(t, 1,
			appendOp(a, blockA, "a1", 1), appendOp(b, blockB, "b1", 1), appendOp(a, blockA, "a2", 2),
			batchOp{"op": "end_block", "prompt": a.promptID, "block": blockA},
			batchOp{"op": "complete_prompt", "prompt": a.promptID},
		); err != nil {
			t.Fatal(err)
		}
		var payloads []string
		for {
			wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			n, err := conn.WaitForNotification(wctx)
			cancel()
			if err != nil {
				break
			}
			payloads = append(payloads, n.Payload)
		}
		slices.Sort(payloads)
		want := []string{
			fmt.Sprintf("%s:%d", a.conversationID, tb.state(t, a.conversationID).Seq),
			fmt.Sprintf("%s:%d", b.conversationID, tb.state(t, b.conversationID).Seq),
		}
		slices.Sort(want)
		if !slices.Equal(payloads, want) {
			t.Errorf("notifications %q, want one per conversation %q", payloads, want)
		}
		if st, _ := tb.blockContent(t, a, blockA); st != "a1a2" {
			t.Errorf("text %q", st)
		}
	})

	t.Run("MalformedBatchChangesNothing", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		block := tb.startBlock(t, r.promptID, "text")
		before := tb.fingerprint(t)
		for _, tc := range []struct {
			name, ops, want string
		}{
			{"NotAnArray", `{"op": "append"}`, "ops must be a JSON array"},
			{"NoPrompt", `[{"op": "append", "block": "` + block.String() + `", "text": "x", "seq": 1}]`, "ops[0].prompt must be a uuid"},
			{"UnknownOp", `[{"op": "append", "prompt": "` + r.promptID.String() + `"}, {"op": "explode", "prompt": "` + r.promptID.String() + `"}]`, "ops[1].op must be one of"},
		} {
			_, err := tb.api.BatchWrite(ctx, apiq.BatchWriteParams{Worker: "w1", Batch: 1, Ops: json.RawMessage(tc.ops)})
			if pgErr := requireSQLState(t, err, sqlstate.InvalidArgument); !strings.Contains(pgErr.Message, tc.want) {
				t.Errorf("%s: %q, want it to say %q", tc.name, pgErr.Message, tc.want)
			}
		}
		// An op that names its prompt but lacks a field refuses that
		// prompt only, saying which field.
		rows, err := tb.writeBatch(t, 1, batchOp{"op": "append", "prompt": r.promptID, "block": block, "text": "x"})
		if err != nil || len(rows) != 1 || rows[0].Code != sqlstate.InvalidArgument || !strings.Contains(rows[0].Message, `needs "seq"`) {
			t.Errorf("append without seq: %+v %v", rows, err)
		}
		if tb.fingerprint(t) != before {
			t.Error("a malformed batch changed something")
		}
	})
}
