package stream_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/stream"
)

// finishedReply streams n deltas into a reply and completes it, returning
// the conversation and the seq of the first delta.
func finishedReply(t *testing.T, tb *testBundle, n int) (uuid.UUID, int64) {
	t.Helper()
	ctx := context.Background()
	conv, block := tb.reply(t)
	if _, err := tb.pool.Exec(ctx, `SELECT convo.append_block($1, 'tok' || g || ' ') FROM generate_series(1, $2::int) g`, block, n); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.pool.Exec(ctx, `SELECT convo.complete_prompt(prompt_id) FROM convo.blocks WHERE id = $1`, block); err != nil {
		t.Fatal(err)
	}
	events, err := tb.store.EventsAfter(ctx, conv, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Kind == conversation.EventBlockDelta {
			return conv, e.Seq
		}
	}
	t.Fatal("no delta written")
	return conv, 0
}

func (tb *testBundle) state(t testing.TB, id uuid.UUID) conversation.State {
	t.Helper()
	st, err := tb.store.State(context.Background(), "local", id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func compact(t *testing.T, store *postgres.Store) {
	t.Helper()
	res, err := store.CompactEvents(context.Background(), 0, 100)
	if err != nil || res.EventsRemoved == 0 {
		t.Fatalf("compact = %+v, %v; want events removed", res, err)
	}
}

// A resume from a seq inside a compacted range starts from a snapshot; one
// from after it resumes from the log.
func TestResumeIntoCompactedRange(t *testing.T) {
	t.Parallel()
	tb := setup(t, hubOptions{})
	conv, first := finishedReply(t, tb, 50)
	compact(t, tb.store)
	last := tb.lastSeq(t, conv)

	ctx := context.Background()
	for _, tc := range []struct {
		after        int64
		wantSnapshot bool
	}{
		{first + 10, true}, // inside the merged deltas
		{first - 1, true},  // just before them: the merged event, then a gap
		{last - 1, false},  // after them
	} {
		sub, err := tb.hub.Open(ctx, stream.OpenParams{OwnerID: "local", ConversationID: conv, AfterSeq: &tc.after})
		if err != nil {
			t.Fatal(err)
		}
		st, ok := sub.Snapshot()
		sub.Close()
		if ok != tc.wantSnapshot {
			t.Errorf("resume after %d: snapshot = %v, want %v", tc.after, ok, tc.wantSnapshot)
		}
		if ok && !reflect.DeepEqual(st, tb.state(t, conv)) {
			t.Errorf("resume after %d: the snapshot is not the conversation's state", tc.after)
		}
	}
}

// A subscriber whose position the hub had not passed when the events were
// compacted gets the merged text, then ErrEventsCompacted at the gap,
// never a wrong event; its resume gets a snapshot.
func TestSubscriberBehindCompaction(t *testing.T) {
	t.Parallel()
	// The hub reads the log only when told to, so the test decides what
	// it has read when the compaction happens.
	tb := setupWithoutFeed(t)
	ctx, pool, hub := context.Background(), tb.pool, tb.hub

	conv, block := tb.reply(t)
	sub, err := hub.Open(ctx, stream.OpenParams{OwnerID: "local", ConversationID: conv})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	snap, _ := sub.Snapshot()
	// The reply, its end and its compaction commit at once, so whenever
	// the hub reads, it finds the compacted log after the snapshot.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, sql := range []string{
			`SELECT count(convo.append_block($1, 'tok' || g || ' ')) FROM generate_series(1, 20) g`,
			`SELECT convo.complete_prompt(prompt_id) FROM convo.blocks WHERE id = $1`,
			`SELECT convo.compact_prompt(prompt_id) FROM convo.blocks WHERE id = $1`,
		} {
			if _, err := tx.Exec(ctx, sql, block); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	hub.Hint(conv, 0)

	var text string
	for {
		next, cancelNext := context.WithTimeout(ctx, 10*time.Second)
		item, err := sub.Next(next)
		cancelNext()
		if errors.Is(err, stream.ErrEventsCompacted) {
			break
		}
		if err != nil {
			t.Fatalf("after %q: %v; want ErrEventsCompacted", text, err)
		}
		text += deltaText(item.Event)
	}
	want := ""
	for i := 1; i <= 20; i++ {
		want += "tok" + strconv.Itoa(i) + " "
	}
	if text != want {
		t.Errorf("before the gap the subscriber got %q, want the merged text %q", text, want)
	}
	if sub.Cursor() <= snap.Seq {
		t.Errorf("cursor %d did not move past the snapshot's %d", sub.Cursor(), snap.Seq)
	}

	after := sub.Cursor()
	resumed, err := hub.Open(ctx, stream.OpenParams{OwnerID: "local", ConversationID: conv, AfterSeq: &after})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	st, ok := resumed.Snapshot()
	if !ok || !reflect.DeepEqual(st, tb.state(t, conv)) {
		t.Errorf("the resume after %d did not start from the conversation's state (snapshot %v)", after, ok)
	}
}
