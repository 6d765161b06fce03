package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// claimReply sends a message and claims its prompt as worker w1, without
// starting it.
func (tb *testBundle) claimReply(t testing.TB) reply {
	t.Helper()
	r := tb.sendMessage(t, uuid.Nil, "hello")
	claimed, err := tb.api.PromptClaim(context.Background(), apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
	if err != nil || len(claimed) != 1 || claimed[0].PromptID != r.promptID {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	return r
}

// writeBatchCounted calls write_batch as worker w1, as writeBatch does, in
// a transaction that counts the function calls it makes, and returns how
// many ops went one by one (calls of convo._batch_apply).
func (tb *testBundle) writeBatchCounted(t testing.TB, number int64, ops ...batchOp) ([]apiq.BatchWriteRow, int) {
	t.Helper()
	ctx := context.Background()
	encoded, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	var rows []apiq.BatchWriteRow
	var before, after int
	// The counts a backend has not yet reported (it reports them at most
	// once a second) include its earlier transactions': the difference is
	// this one's.
	calls := `SELECT coalesce(sum(calls), 0)::int FROM pg_stat_xact_user_functions
		WHERE schemaname = 'convo' AND funcname = '_batch_apply'`
	err = pgx.BeginFunc(ctx, tb.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'all'`); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, calls).Scan(&before); err != nil {
			return err
		}
		if rows, err = apiq.New(tx).BatchWrite(ctx, apiq.BatchWriteParams{Worker: "w1", Batch: number, Ops: encoded}); err != nil {
			return err
		}
		return tx.QueryRow(ctx, calls).Scan(&after)
	})
	if err != nil {
		t.Fatalf("write_batch: %v", err)
	}
	return rows, after - before
}

var (
	uuidText = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeText = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
)

// shape is a conversation's log and rows with every id named by the order
// it first appears in and every time left out: two conversations written
// alike have the same shape.
func (tb *testBundle) shape(t testing.TB, conversationID uuid.UUID) string {
	t.Helper()
	var b strings.Builder
	for _, e := range tb.events(t, conversationID) {
		fmt.Fprintf(&b, "%d %s prompt=%s block=%s tool=%s %s\n", e.Seq, e.Kind, e.PromptID.UUID, e.BlockID.UUID,
			e.ToolCallID.UUID, e.Payload)
	}
	var rows string
	if err := tb.pool.QueryRow(context.Background(), `
		SELECT concat_ws(E'\n', c.last_seq, coalesce(c.delta_block_id::text, '-'), c.delta_count,
			(SELECT string_agg(concat_ws(' ', p.id, p.status, p.started_at IS NOT NULL, p.lease_expires_at > now(), p.attempts,
			                             coalesce(p.worker, '-')), ',' ORDER BY p.created_at) FROM convo.prompts p WHERE p.conversation_id = c.id),
			(SELECT string_agg(concat_ws(' ', m.id, m.role, m.status, m.position), ',' ORDER BY m.position)
			   FROM convo.messages m WHERE m.conversation_id = c.id),
			(SELECT string_agg(concat_ws(' ', b.id, b.message_id, b.prompt_id, b.position, b.block_type, b.status, b.metadata,
			                             b.delta_count, coalesce(b.start_seq::text, '-'), b.content), ',' ORDER BY b.created_at, b.position)
			   FROM convo.blocks b WHERE b.conversation_id = c.id))
		  FROM convo.conversations c WHERE c.id = $1`, conversationID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	b.WriteString(rows)
	names := map[string]string{}
	out := uuidText.ReplaceAllStringFunc(b.String(), func(id string) string {
		if id == uuid.Nil.String() {
			return "-"
		}
		if _, ok := names[id]; !ok {
			names[id] = fmt.Sprintf("id%d", len(names)+1)
		}
		return names[id]
	})
	return timeText.ReplaceAllString(out, "T")
}

// TestBatchStarts checks write_batch's one statement for the starts and
// first texts of its replies (convo._batch_starts) against the same ops
// applied one by one: the same events, payloads and seqs, the same rows.
// A heartbeat op before a reply's ops keeps them off that statement (its
// shapes are the start, the block and its first append, or both), so that
// the two ways run side by side in one database.
func TestBatchStarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	heartbeat := func(r reply) batchOp { return batchOp{"op": "heartbeat", "prompt": r.promptID} }
	start := func(r reply) batchOp { return batchOp{"op": "start_prompt", "prompt": r.promptID} }
	block := func(r reply, id uuid.UUID) batchOp {
		return batchOp{"op": "start_block", "prompt": r.promptID, "block": id, "type": "text"}
	}

	t.Run("AsOneByOne", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		// Two batches (the start, then the block and its first text, as the
		// Go runtime's urgent lane writes them) and one of all three.
		fast2, slow2, fast1, slow1 := tb.claimReply(t), tb.claimReply(t), tb.claimReply(t), tb.claimReply(t)
		fastBlock2, slowBlock2, fastBlock1, slowBlock1 := uuid.New(), uuid.New(), uuid.New(), uuid.New()

		rows, oneByOne := tb.writeBatchCounted(t, 1, start(fast2), heartbeat(slow2), start(slow2))
		if len(rows) > 0 || oneByOne != 2 {
			t.Fatalf("starts: refused %+v, %d ops one by one; want none refused, the slow reply's 2", rows, oneByOne)
		}
		rows, oneByOne = tb.writeBatchCounted(t, 2,
			block(fast2, fastBlock2), appendOp(fast2, fastBlock2, "Hello", 1),
			heartbeat(slow2), block(slow2, slowBlock2), appendOp(slow2, slowBlock2, "Hello", 1))
		if len(rows) > 0 || oneByOne != 3 {
			t.Fatalf("first texts: refused %+v, %d ops one by one; want none refused, the slow reply's 3", rows, oneByOne)
		}
		rows, oneByOne = tb.writeBatchCounted(t, 3,
			heartbeat(slow1), start(slow1), block(slow1, slowBlock1), appendOp(slow1, slowBlock1, "Hi", 1),
			start(fast1), block(fast1, fastBlock1), appendOp(fast1, fastBlock1, "Hi", 1))
		if len(rows) > 0 || oneByOne != 4 {
			t.Fatalf("starts with first texts: refused %+v, %d ops one by one; want none refused, the slow reply's 4", rows, oneByOne)
		}
		// The next appends take the common path from the block the fast
		// statement made the conversation's delta block.
		if rows, err := tb.writeBatch(t, 4, appendOp(fast2, fastBlock2, " world", 2), appendOp(slow2, slowBlock2, " world", 2),
			appendOp(fast1, fastBlock1, " there", 2), appendOp(slow1, slowBlock1, " there", 2)); err != nil || len(rows) > 0 {
			t.Fatalf("appends: %v %+v", err, rows)
		}
		for _, pair := range [][2]reply{{fast2, slow2}, {fast1, slow1}} {
			if fast, slow := tb.shape(t, pair[0].conversationID), tb.shape(t, pair[1].conversationID); fast != slow {
				t.Errorf("the batch's statement wrote\n%s\none by one:\n%s", fast, slow)
			}
		}
		if text, _ := tb.blockContent(t, fast2, fastBlock2); text != "Hello world" {
			t.Errorf("text %q, want Hello world", text)
		}
	})

	t.Run("ManyRepliesInOneStatement", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		var replies []reply
		var ops []batchOp
		for range 20 {
			r, id := tb.claimReply(t), uuid.New()
			replies = append(replies, r)
			ops = append(ops, start(r), block(r, id), appendOp(r, id, "Hello", 1))
		}
		rows, oneByOne := tb.writeBatchCounted(t, 1, ops...)
		if len(rows) > 0 || oneByOne != 0 {
			t.Fatalf("refused %+v, %d ops one by one; want every op in the one statement", rows, oneByOne)
		}
		want := tb.shape(t, replies[0].conversationID)
		for _, r := range replies[1:] {
			if got := tb.shape(t, r.conversationID); got != want {
				t.Errorf("reply %s:\n%s\nwant\n%s", r.promptID, got, want)
			}
		}
		var notified int
		if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM convo.events WHERE kind = 'blockDelta'`).Scan(&notified); err != nil || notified != 20 {
			t.Errorf("%d first texts, %v; want 20", notified, err)
		}
	})

	// What the statement does not take goes one by one, with the errors of
	// the calls; the replies it took are applied all the same, once, though
	// a refusal applies the batch again.
	t.Run("OthersGoOneByOne", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		fine, file, skip, taken, streaming := tb.claimReply(t), tb.claimReply(t), tb.claimReply(t), tb.claimReply(t), tb.startReply(t)
		fineBlock, fileBlock, skipBlock, streamingBlock := uuid.New(), uuid.New(), uuid.New(), uuid.New()
		// A block that streams in streaming's conversation: the new one
		// takes the deltas from it, which the statement leaves to
		// append_block. Its id is the one taken's block reuses.
		reasoning := tb.startBlock(t, streaming.promptID, "reasoning")
		tb.append(t, reasoning, "thinking")
		rows, err := tb.writeBatch(t, 1,
			start(fine), block(fine, fineBlock), appendOp(fine, fineBlock, "ok", 1), // 0-2
			start(file), batchOp{"op": "start_block", "prompt": file.promptID, "block": fileBlock, "type": "file"}, // 3-4
			appendOp(file, fileBlock, "no", 1),
			start(skip), block(skip, skipBlock), appendOp(skip, skipBlock, "no", 2), // 6-8
			start(taken), block(taken, reasoning), appendOp(taken, reasoning, "no", 1), // 9-11
			block(streaming, streamingBlock), appendOp(streaming, streamingBlock, "answer", 1)) // 12-13
		if err != nil {
			t.Fatal(err)
		}
		got := map[uuid.UUID]string{}
		for _, r := range rows {
			got[r.PromptID] = fmt.Sprintf("%d %s", r.OpIndex, r.Code)
		}
		want := map[uuid.UUID]string{file.promptID: "4 CV003", skip.promptID: "8 CV002", taken.promptID: "10 23505"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("refused %v, want %v (%+v)", got, want, rows)
		}
		for _, c := range []struct {
			r     reply
			kinds string
		}{
			{fine, "promptStarted messageUpdated blockStart blockDelta"},
			{file, "promptStarted messageUpdated"},
			{skip, "promptStarted messageUpdated blockStart"},
			{taken, "promptStarted messageUpdated"},
			{streaming, "blockStart blockDelta"},
		} {
			events := kinds(tb.events(t, c.r.conversationID))
			if got := strings.Join(events[len(events)-len(strings.Fields(c.kinds)):], " "); got != c.kinds {
				t.Errorf("prompt %s: last events %v, want … %s", c.r.promptID, events, c.kinds)
			}
		}
		if text, _ := tb.blockContent(t, fine, fineBlock); text != "ok" {
			t.Errorf("fine's text %q, want ok", text)
		}
		if text, _ := tb.blockContent(t, streaming, streamingBlock); text != "answer" {
			t.Errorf("streaming's text %q, want answer", text)
		}
		if text, _ := tb.blockContent(t, streaming, reasoning); text != "thinking" {
			t.Errorf("the reasoning block's text %q, want thinking", text)
		}
		var count int
		if err := tb.pool.QueryRow(ctx, `SELECT delta_count FROM convo.blocks WHERE id = $1`, reasoning).Scan(&count); err != nil || count != 1 {
			t.Errorf("the reasoning block's delta_count = %d, %v; want 1, moved to its row", count, err)
		}
	})

	// Two replies of one conversation (a comparison) go one by one, in the
	// order of their ops, as before.
	t.Run("OneConversationTwoReplies", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		both := func() [2]reply {
			res, err := tb.send(ctx, "local", uuid.Nil, 2)
			if err != nil {
				t.Fatal(err)
			}
			claimed, err := tb.api.PromptClaimMany(ctx, apiq.PromptClaimManyParams{Worker: "w1", LeaseSeconds: 30, MaxPrompts: 2})
			if err != nil || len(claimed) != 2 {
				t.Fatalf("claim: %v %+v", err, claimed)
			}
			var rs [2]reply
			for i := range rs {
				rs[i] = reply{conversationID: res.ConversationID, messageID: res.AssistantMessageIDs[i], promptID: res.PromptIDs[i]}
			}
			return rs
		}
		pair, reference := both(), both()
		var ops, refOps []batchOp
		for i := range 2 {
			id, refID := uuid.New(), uuid.New()
			ops = append(ops, start(pair[i]), block(pair[i], id), appendOp(pair[i], id, "Hi", 1))
			refOps = append(refOps, heartbeat(reference[i]), start(reference[i]), block(reference[i], refID),
				appendOp(reference[i], refID, "Hi", 1))
		}
		rows, oneByOne := tb.writeBatchCounted(t, 1, ops...)
		if len(rows) > 0 || oneByOne != 6 {
			t.Fatalf("refused %+v, %d ops one by one; want the 6", rows, oneByOne)
		}
		if rows, err := tb.writeBatch(t, 2, refOps...); err != nil || len(rows) > 0 {
			t.Fatalf("reference: %v %+v", err, rows)
		}
		if got, want := tb.shape(t, pair[0].conversationID), tb.shape(t, reference[0].conversationID); got != want {
			t.Errorf("the comparison wrote\n%s\nwant\n%s", got, want)
		}
	})
}
