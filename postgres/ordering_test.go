package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/conversation"
)

// TestSeqOrdering checks the event log's central guarantee under concurrent
// writers: seq is gap-free and becomes visible in seq order, so a reader
// that follows the log by "after the last seq I saw" never skips an event.
func TestSeqOrdering(t *testing.T) {
	t.Parallel()
	const writers, appends = 8, 500
	ctx := context.Background()
	tb := setup(t)
	r := tb.startReply(t)
	blocks := make([]uuid.UUID, writers)
	for i := range blocks {
		blocks[i] = tb.startBlock(t, r.promptID, "text")
	}
	base := tb.state(t, r.conversationID).Seq

	// A follower reads "events after the last seq I saw" while the writers
	// run. If seq N+1 could commit after N+2, it would skip N+1 forever.
	done := make(chan struct{})
	followed := make(chan []int64, 1)
	go func() {
		var seen []int64
		last := base
		for {
			select {
			case <-done:
				events, _ := tb.store.EventsAfter(ctx, r.conversationID, last, 100_000)
				for _, e := range events {
					seen = append(seen, e.Seq)
				}
				followed <- seen
				return
			default:
			}
			events, err := tb.store.EventsAfter(ctx, r.conversationID, last, 1000)
			if err != nil {
				t.Error(err)
				followed <- seen
				return
			}
			for _, e := range events {
				seen = append(seen, e.Seq)
				last = e.Seq
			}
		}
	}()

	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range appends {
				if err := tb.api.BlockAppend(ctx, appendParams(blocks[w], fmt.Sprintf("%d,", i))); err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	seen := <-followed

	total := writers * appends
	if len(seen) != total {
		t.Fatalf("follower saw %d events, want %d", len(seen), total)
	}
	for i, seq := range seen {
		if want := base + int64(i) + 1; seq != want {
			t.Fatalf("follower's event %d has seq %d, want %d (skipped or repeated)", i, seq, want)
		}
	}
	// Each writer's deltas landed in its own block, in its own order.
	st := tb.state(t, r.conversationID)
	var want strings.Builder
	for i := range appends {
		fmt.Fprintf(&want, "%d,", i)
	}
	for _, b := range st.Messages[1].Blocks {
		if b.Content != want.String() {
			t.Fatalf("block %s content out of order (len %d)", b.ID, len(b.Content))
		}
	}
}

// TestNotify checks that a LISTEN connection hears each committed change
// and nothing of a rolled-back one.
func TestNotify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.startReply(t)
	b := tb.startBlock(t, r.promptID, "text")

	listener, err := pgx.ConnectConfig(ctx, tb.pool.Config().ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	if _, err := listener.Exec(ctx, "LISTEN convo_events"); err != nil {
		t.Fatal(err)
	}

	// Rolled back: appends an event inside a transaction that never commits.
	tx, err := tb.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.api.WithTx(tx).BlockAppend(ctx, appendParams(b, "never")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Committed.
	tb.append(t, b, "hello")
	seq := tb.state(t, r.conversationID).Seq

	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := listener.WaitForNotification(waitCtx)
	if err != nil {
		t.Fatalf("no notification for the committed append: %v", err)
	}
	// The first notification is the committed one: the rolled-back append
	// (which held the same seq) produced none.
	if want := fmt.Sprintf("%s:%d", r.conversationID, seq); n.Channel != "convo_events" || n.Payload != want {
		t.Fatalf("notification = %s %q, want convo_events %q", n.Channel, n.Payload, want)
	}
	if len(n.Payload) > 100 {
		t.Errorf("payload is %d bytes; it must stay a small pointer", len(n.Payload))
	}
}

// TestStateIsConsistentUnderWrites reads State while a writer streams, and
// checks that each State holds exactly the text of the deltas at or below
// its Seq: nothing between the state and its seq.
func TestStateIsConsistentUnderWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.startReply(t)
	b := tb.startBlock(t, r.promptID, "text")

	const deltas = 400
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := range deltas {
			if err := tb.api.BlockAppend(ctx, appendParams(b, fmt.Sprintf("<%d>", i))); err != nil {
				t.Errorf("append: %v", err)
				return
			}
		}
	}()
	var states []conversation.State
	for {
		st, err := tb.store.State(ctx, "local", r.conversationID)
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, st)
		select {
		case <-writerDone:
		default:
			continue
		}
		break
	}

	events := tb.events(t, r.conversationID)
	for _, st := range states {
		var want strings.Builder
		for _, e := range events {
			if e.Seq <= st.Seq && e.Kind == conversation.EventBlockDelta {
				want.WriteString(deltaContent(t, e))
			}
		}
		if got := st.Messages[1].Blocks[0].Content; got != want.String() {
			t.Fatalf("state at seq %d holds %d bytes, the log up to that seq %d", st.Seq, len(got), want.Len())
		}
	}
	if len(states) < 3 {
		t.Logf("only %d states read during the writes", len(states))
	}
}
