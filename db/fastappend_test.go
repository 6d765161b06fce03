package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// The tests below cover append_block's common path
// (db/schema/00008_fast_append.sql): the conversation row remembers the
// block that took its latest delta, and every way a block stops taking
// deltas must make the next call take the checked path.

// appendSeq appends delta to block as delta number seq.
func (tb *testBundle) appendSeq(t testing.TB, block uuid.UUID, delta string, seq int32) error {
	t.Helper()
	return tb.api.BlockAppend(context.Background(), apiq.BlockAppendParams{BlockID: block, Delta: delta, DeltaSeq: &seq})
}

// blockDeltas returns the blockDelta contents of block in the log, in order.
func (tb *testBundle) blockDeltas(t testing.TB, conversationID, block uuid.UUID) []string {
	t.Helper()
	var out []string
	for _, e := range tb.events(t, conversationID) {
		if e.Kind == conversation.EventBlockDelta && e.BlockID.Valid && e.BlockID.UUID == block {
			out = append(out, deltaContent(t, e))
		}
	}
	return out
}

// TestAppendAfterBlockStopsStreaming checks that a block that took deltas
// (so that its conversation remembers it) rejects the next one, with the
// documented error and no change, however it stopped taking deltas.
func TestAppendAfterBlockStopsStreaming(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name, sqlstate, message string
		stop                    func(t *testing.T, tb *testBundle, r reply, block uuid.UUID)
	}{
		{"BlockEnded", "CV002", "has ended", func(t *testing.T, tb *testBundle, r reply, block uuid.UUID) {
			if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: block}); err != nil {
				t.Fatal(err)
			}
		}},
		{"PromptCompleted", "CV002", "is completed, not running", func(t *testing.T, tb *testBundle, r reply, block uuid.UUID) {
			if err := tb.api.PromptComplete(ctx, r.promptID); err != nil {
				t.Fatal(err)
			}
		}},
		{"PromptFailed", "CV002", "is failed, not running", func(t *testing.T, tb *testBundle, r reply, block uuid.UUID) {
			if err := tb.api.PromptFail(ctx, apiq.PromptFailParams{PromptID: r.promptID, Error: "model error"}); err != nil {
				t.Fatal(err)
			}
		}},
		{"PromptCancelled", "CV002", "is cancelled, not running", func(t *testing.T, tb *testBundle, r reply, block uuid.UUID) {
			if _, err := tb.store.CancelPrompt(ctx, "local", r.promptID); err != nil {
				t.Fatal(err)
			}
		}},
		{"LeaseExpired", "CV002", "is failed, not running", func(t *testing.T, tb *testBundle, r reply, block uuid.UUID) {
			if _, err := tb.pool.Exec(ctx, `UPDATE convo.prompts SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, r.promptID); err != nil {
				t.Fatal(err)
			}
			if _, err := tb.pool.Exec(ctx, `SELECT convo.expire_leases()`); err != nil {
				t.Fatal(err)
			}
		}},
		// Not through the API: a prompt whose status an operator changes by
		// hand, its blocks left streaming.
		{"PromptStatusSetBySQL", "CV002", "is failed, not running", func(t *testing.T, tb *testBundle, r reply, block uuid.UUID) {
			if _, err := tb.pool.Exec(ctx, `UPDATE convo.prompts SET status = 'failed' WHERE id = $1`, r.promptID); err != nil {
				t.Fatal(err)
			}
		}},
		{"MessageDeletedBySQL", "CV001", "does not exist", func(t *testing.T, tb *testBundle, r reply, block uuid.UUID) {
			if _, err := tb.pool.Exec(ctx, `DELETE FROM convo.messages WHERE id = $1`, r.messageID); err != nil {
				t.Fatal(err)
			}
		}},
		{"HistoryCleared", "CV001", "does not exist", func(t *testing.T, tb *testBundle, r reply, block uuid.UUID) {
			if _, err := tb.store.ClearConversation(ctx, "local", r.conversationID); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		for _, withSeq := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/DeltaSeq=%v", tc.name, withSeq), func(t *testing.T) {
				t.Parallel()
				tb := setup(t)
				r := tb.startReply(t)
				block := tb.startBlock(t, r.promptID, "text")
				for i := range int32(3) {
					if err := tb.appendSeq(t, block, "x", i+1); err != nil {
						t.Fatal(err)
					}
				}
				tc.stop(t, tb, r, block)
				before := tb.fingerprint(t)
				params := apiq.BlockAppendParams{BlockID: block, Delta: "late"}
				if withSeq {
					four := int32(4)
					params.DeltaSeq = &four
				}
				pgErr := requireSQLState(t, tb.api.BlockAppend(ctx, params), tc.sqlstate)
				if !strings.Contains(pgErr.Message, tc.message) || !strings.HasPrefix(pgErr.Message, "append_block: ") {
					t.Errorf("message %q, want append_block: … %q", pgErr.Message, tc.message)
				}
				if after := tb.fingerprint(t); after != before {
					t.Errorf("the rejected append changed state:\n before %s\n after  %s", before, after)
				}
			})
		}
	}
}

// TestInterleavedBlocksKeepTheirCounts appends to two blocks of one
// conversation in turn (as the two prompts of an A/B comparison do), so
// that every call moves the conversation's remembered block, with retries
// and a skip-ahead at each step.
func TestInterleavedBlocksKeepTheirCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	res, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: "local", Text: "compare",
		ModelConfigs: []json.RawMessage{json.RawMessage(`{"model":"a"}`), json.RawMessage(`{"model":"b"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var blocks [2]uuid.UUID
	for i, p := range res.PromptIDs {
		if err := tb.api.PromptStart(ctx, p); err != nil {
			t.Fatal(err)
		}
		blocks[i] = tb.startBlock(t, p, "text")
	}
	var want [2]strings.Builder
	for n := int32(1); n <= 5; n++ {
		for i, b := range blocks {
			delta := fmt.Sprintf("%c%d ", 'a'+i, n)
			if err := tb.appendSeq(t, b, delta, n); err != nil {
				t.Fatalf("block %d delta %d: %v", i, n, err)
			}
			want[i].WriteString(delta)
			// The other block's retry of its last delta is a no-op …
			if n > 1 || i == 1 {
				other, last := blocks[1-i], n
				if i == 0 {
					last = n - 1
				}
				if err := tb.appendSeq(t, other, "dup", last); err != nil {
					t.Fatalf("retry on block %d: %v", 1-i, err)
				}
			}
			// … and skipping ahead says how many it has.
			pgErr := requireSQLState(t, tb.appendSeq(t, b, "skip", n+2), "CV002")
			if wantMsg := fmt.Sprintf("has %d deltas, the next is %d", n, n+1); !strings.Contains(pgErr.Message, wantMsg) {
				t.Fatalf("skip-ahead message %q, want %q", pgErr.Message, wantMsg)
			}
		}
	}
	// Calls without delta_seq count too, and an empty delta counts without
	// an event.
	tb.append(t, blocks[0], "")
	tb.append(t, blocks[0], "tail")
	want[0].WriteString("tail")
	if err := tb.appendSeq(t, blocks[0], "again", 8); err != nil {
		t.Fatal(err)
	}
	want[0].WriteString("again")
	if err := tb.appendSeq(t, blocks[0], "again", 8); err != nil {
		t.Fatal(err)
	}

	// Streaming, the snapshot reads each block's text from its deltas.
	st := tb.state(t, res.ConversationID)
	for i, b := range blocks {
		if got := tb.blockDeltas(t, res.ConversationID, b); strings.Join(got, "") != want[i].String() {
			t.Errorf("block %d deltas %q, want %q", i, got, want[i].String())
		}
	}
	if got := streamingText(st, blocks[0]); got != want[0].String() {
		t.Errorf("snapshot text of block 0 = %q, want %q", got, want[0].String())
	}
	for i, b := range blocks {
		if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: b}); err != nil {
			t.Fatal(err)
		}
		var content string
		var count int32
		if err := tb.pool.QueryRow(ctx, `SELECT content, delta_count FROM convo.blocks WHERE id = $1`, b).Scan(&content, &count); err != nil {
			t.Fatal(err)
		}
		wantCount := int32(5)
		if i == 0 {
			wantCount = 8
		}
		if content != want[i].String() || count != wantCount {
			t.Errorf("ended block %d: content %q, delta_count %d; want %q, %d", i, content, count, want[i].String(), wantCount)
		}
	}
}

// streamingText is the text a snapshot shows for block (in-flight blocks
// included).
func streamingText(st conversation.State, block uuid.UUID) string {
	for _, m := range st.Messages {
		for _, b := range m.Blocks {
			if b.ID == block {
				return b.Content
			}
		}
	}
	return "<missing>"
}

// TestAppendRaces holds the conversation's lock while appends queue behind
// it, then commits a change they must see: a retry of the same delta_seq
// applies once, and a block ended meanwhile takes no delta after its
// blockEnd.
func TestAppendRaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// queueBehind starts calls, each on its own connection, once tx holds
	// the conversation's lock, and waits until all of them wait for it.
	queueBehind := func(t *testing.T, tb *testBundle, calls ...func() error) <-chan error {
		t.Helper()
		errs := make(chan error, len(calls))
		var wg sync.WaitGroup
		for _, call := range calls {
			wg.Go(func() { errs <- call() })
		}
		go func() { wg.Wait(); close(errs) }()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var waiting int
			if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%append_block%'`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting == len(calls) {
				return errs
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d appends wait for the lock", waiting, len(calls))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	lock := func(t *testing.T, tb *testBundle, conversationID uuid.UUID) pgx.Tx {
		t.Helper()
		tx, err := tb.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		if _, err := tx.Exec(ctx, `SELECT 1 FROM convo.conversations WHERE id = $1 FOR NO KEY UPDATE`, conversationID); err != nil {
			t.Fatal(err)
		}
		return tx
	}

	t.Run("RetryRacingTheOriginalAppliesOnce", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		block := tb.startBlock(t, r.promptID, "text")
		if err := tb.appendSeq(t, block, "a", 1); err != nil {
			t.Fatal(err)
		}
		tx := lock(t, tb, r.conversationID)
		errs := queueBehind(t, tb,
			func() error { return tb.appendSeq(t, block, "b", 2) },
			func() error { return tb.appendSeq(t, block, "b", 2) })
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		for err := range errs {
			if err != nil {
				t.Errorf("append: %v", err)
			}
		}
		if got := tb.blockDeltas(t, r.conversationID, block); strings.Join(got, "") != "ab" {
			t.Errorf("deltas %q, want a, b", got)
		}
	})

	t.Run("EndCommittedBeforeQueuedAppend", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		block := tb.startBlock(t, r.promptID, "text")
		tb.append(t, block, "a")
		tx := lock(t, tb, r.conversationID)
		errs := queueBehind(t, tb, func() error { return tb.api.BlockAppend(ctx, appendParams(block, "late")) })
		if _, err := tx.Exec(ctx, `SELECT convo.end_block($1)`, block); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		pgErr := requireSQLState(t, <-errs, "CV002")
		if !strings.Contains(pgErr.Message, "has ended") {
			t.Errorf("message %q, want has ended", pgErr.Message)
		}
		got := kinds(tb.events(t, r.conversationID))
		if last := got[len(got)-1]; last != string(conversation.EventBlockEnd) {
			t.Errorf("events end with %s, want blockEnd: %v", last, got)
		}
	})

	// The queued append read the block before it was deleted.
	t.Run("DeleteCommittedBeforeQueuedAppend", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		block := tb.startBlock(t, r.promptID, "text")
		tb.append(t, block, "a")
		tx := lock(t, tb, r.conversationID)
		errs := queueBehind(t, tb, func() error { return tb.api.BlockAppend(ctx, appendParams(block, "late")) })
		if _, err := tx.Exec(ctx, `DELETE FROM convo.messages WHERE id = $1`, r.messageID); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		requireSQLState(t, <-errs, "CV001")
		if got := tb.blockDeltas(t, r.conversationID, block); len(got) != 1 {
			t.Errorf("deltas %q, want only the one before the delete", got)
		}
	})
}

// TestDeleteConversationDeletesEvents checks that a conversation's events
// go with it, however it is deleted (the event log has no foreign key).
func TestDeleteConversationDeletesEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	var kept, viaAPI, viaSQL reply
	for _, r := range []*reply{&kept, &viaAPI, &viaSQL} {
		*r = tb.startReply(t)
		tb.append(t, tb.startBlock(t, r.promptID, "text"), "x")
	}
	if err := tb.store.DeleteConversation(ctx, "local", viaAPI.conversationID); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.pool.Exec(ctx, `DELETE FROM convo.conversations WHERE id = $1`, viaSQL.conversationID); err != nil {
		t.Fatal(err)
	}
	rows, err := tb.pool.Query(ctx, `SELECT DISTINCT conversation_id FROM convo.events`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0] != kept.conversationID {
		t.Errorf("events left of conversations %v, want only %s", left, kept.conversationID)
	}
}

// TestToolOutputWhileStreaming reads a running tool call's output and a
// streaming block's text from their events while other blocks of the
// prompt stream around them.
func TestToolOutputWhileStreaming(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.startReply(t)
	text := tb.startBlock(t, r.promptID, "text")
	tb.append(t, text, "before ")
	use := tb.startBlock(t, r.promptID, "tool_use")
	tb.append(t, use, `{"q":1}`)
	call, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: use, Name: "search", Input: json.RawMessage(`{"q":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		tb.append(t, text, fmt.Sprintf("t%d ", i))
		if err := tb.api.ToolCallProgress(ctx, apiq.ToolCallProgressParams{ToolCallID: call, Output: fmt.Sprintf("o%d ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	st := tb.state(t, r.conversationID)
	if got, want := streamingText(st, text), "before t0 t1 t2 "; got != want {
		t.Errorf("text block = %q, want %q", got, want)
	}
	if got, want := streamingText(st, use), `{"q":1}`; got != want {
		t.Errorf("tool_use block = %q, want %q", got, want)
	}
	var output string
	if err := tb.pool.QueryRow(ctx, `SELECT convo._tool_output($1)`, call).Scan(&output); err != nil {
		t.Fatal(err)
	}
	if want := "o0 o1 o2 "; output != want {
		t.Errorf("tool output = %q, want %q", output, want)
	}
}

// TestFastAppendMigrationDown rolls the schema back past
// 00008_fast_append.sql with a reply streaming, and forward again: the
// block keeps its count of appends both ways, so a worker's delta_seq
// carries on.
func TestFastAppendMigrationDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	r := tb.startReply(t)
	block := tb.startBlock(t, r.promptID, "text")
	for i := range int32(3) {
		if err := tb.appendSeq(t, block, fmt.Sprintf("%d", i+1), i+1); err != nil {
			t.Fatal(err)
		}
	}

	provider := migrations(t, dsn)
	if _, err := provider.DownTo(ctx, 7); err != nil {
		t.Fatalf("down to 7: %v", err)
	}
	var fkeys int
	if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint
		WHERE conrelid = 'convo.events'::regclass AND contype = 'f'`).Scan(&fkeys); err != nil {
		t.Fatal(err)
	}
	if fkeys != 1 {
		t.Errorf("%d foreign keys on convo.events after down, want 1", fkeys)
	}
	if err := tb.appendSeq(t, block, "3", 3); err != nil { // a retry
		t.Fatal(err)
	}
	if err := tb.appendSeq(t, block, "4", 4); err != nil {
		t.Fatalf("append after down: %v", err)
	}

	if _, err := provider.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	if err := tb.appendSeq(t, block, "4", 4); err != nil { // a retry
		t.Fatal(err)
	}
	if err := tb.appendSeq(t, block, "5", 5); err != nil {
		t.Fatalf("append after up: %v", err)
	}
	err := tb.appendSeq(t, block, "7", 7)
	if pgErr := requireSQLState(t, err, "CV002"); !strings.Contains(pgErr.Message, "has 5 deltas") {
		t.Errorf("skip-ahead message %q, want has 5 deltas", pgErr.Message)
	}
	st := tb.state(t, r.conversationID)
	if got := streamingText(st, block); got != "12345" {
		t.Errorf("text after down and up = %q, want 12345", got)
	}
}

// TestConversationChecks checks that convo.conversations still refuses an
// empty owner and an over-long title, as its CHECK constraints did (a
// trigger on those columns now, so that the per-event update of last_seq
// does not evaluate them).
func TestConversationChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.sendMessage(t, uuid.Nil, "hi")
	for _, tc := range []struct {
		name, sql, constraint string
		args                  []any
	}{
		{"EmptyOwner", `INSERT INTO convo.conversations (owner_id) VALUES ('')`, "conversations_owner_id_check", nil},
		{"OwnerSetEmpty", `UPDATE convo.conversations SET owner_id = '' WHERE id = $1`, "conversations_owner_id_check", []any{r.conversationID}},
		{"LongTitle", `UPDATE convo.conversations SET title = repeat('x', 201) WHERE id = $1`, "conversations_title_check", []any{r.conversationID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tb.pool.Exec(ctx, tc.sql, tc.args...)
			if pgErr := requireSQLState(t, err, "23514"); pgErr.ConstraintName != tc.constraint {
				t.Errorf("constraint %q, want %q", pgErr.ConstraintName, tc.constraint)
			}
		})
	}
	if _, err := tb.pool.Exec(ctx, `UPDATE convo.conversations SET title = repeat('x', 200) WHERE id = $1`, r.conversationID); err != nil {
		t.Errorf("a 200-character title: %v", err)
	}
}
