package connectapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/internal/testwait"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

// logicalFeed returns the bundle's logical feed once it streams.
func (tb *testBundle) logicalFeed(t testing.TB) *stream.LogicalFeed {
	t.Helper()
	feed := tb.feed.(*stream.LogicalFeed)
	testwait.For(t, "the logical feed to connect", func() bool { return feed.Slot() != "" })
	return feed
}

// terminateFeed ends the feed's replication connection from the server
// side, as a failover or an administrator would.
func (tb *testBundle) terminateFeed(t testing.TB, feed *stream.LogicalFeed) {
	t.Helper()
	var n int
	err := tb.pool.QueryRow(context.Background(),
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_replication WHERE application_name = $1`,
		feed.ConnConfig.RuntimeParams["application_name"]).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no replication connection of the feed in pg_stat_replication")
	}
}

// TestLogicalFeed covers what the logical replication feed adds to the
// stream suite (which runs under both feeds): rows delivered whole and
// exactly as the log has them, reconnects that lose nothing, and a slot
// that neither outlives the feed nor holds WAL back.
func TestLogicalFeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DeliversRowsAsLogged", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, setupOptions{feed: feedLogical})
		tb.logicalFeed(t)
		sent, prompt := tb.running(t)
		sub := subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId})
		from := sub.waitSeq(t, 0, streamTimeout).seq

		// A payload far above NOTIFY's 8000 bytes (TOASTed in the WAL),
		// non-ASCII text, nulls in JSON, a tool call.
		block := tb.startBlock(t, prompt, "tool_use")
		tb.appendText(t, block, strings.Repeat("日本語 🙂 \"quoted\"\n", 2000))
		call, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: block, Name: "search", Input: json.RawMessage(`{"q":"é","n":null,"a":[1,2.5]}`)})
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.api.ToolCallComplete(ctx, apiq.ToolCallCompleteParams{ToolCallID: call}); err != nil {
			t.Fatal(err)
		}
		if err := tb.api.PromptComplete(ctx, prompt); err != nil {
			t.Fatal(err)
		}
		last := tb.mark(t, sent.ConversationId)
		sub.waitSeq(t, last, streamTimeout)

		logged, err := tb.store.EventsAfter(ctx, uuid.MustParse(sent.ConversationId), from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		sub.mu.Lock()
		var live []*convov1.Event
		for _, m := range sub.received {
			if e := m.GetEvent(); e != nil && !e.Replay && e.Seq > from {
				live = append(live, e)
			}
		}
		sub.mu.Unlock()
		if len(live) != len(logged) {
			t.Fatalf("received %d events after seq %d, the log has %d", len(live), from, len(logged))
		}
		for i, e := range logged {
			want, err := wire.DecodeEvent(e)
			if err != nil {
				t.Fatal(err)
			}
			if got := live[i]; !proto.Equal(got, want.GetEvent()) {
				t.Errorf("event %d:\nstreamed %v\nlogged   %v", e.Seq, got, want)
			}
		}
	})

	t.Run("SurvivesTerminatedConnections", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, setupOptions{feed: feedLogical, queueSize: 4096})
		feed := tb.logicalFeed(t)
		sent, prompt := tb.running(t)
		block := tb.startBlock(t, prompt, "text")
		var subs []*subscriber
		for range 3 {
			subs = append(subs, subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId}))
		}

		// 1,000 deltas, each its own commit; every 150 the replication
		// connection is killed (once the previous kill was recovered from),
		// and writing goes on while it reconnects.
		const deltas = 1000
		var want strings.Builder
		kills := 0
		for i := range deltas {
			delta := fmt.Sprintf("%d,", i)
			tb.appendText(t, block, delta)
			want.WriteString(delta)
			if i%150 == 75 {
				testwait.For(t, "the feed to reconnect", func() bool { return feed.Connects() > int64(kills) && feed.Slot() != "" })
				tb.terminateFeed(t, feed)
				kills++
			}
		}
		if err := tb.api.PromptComplete(ctx, prompt); err != nil {
			t.Fatal(err)
		}
		last := tb.mark(t, sent.ConversationId)
		final := tb.state(t, sent.ConversationId)
		for i, sub := range subs {
			// The fold fails on any event out of order or repeated.
			st := sub.waitSeq(t, last, streamTimeout)
			if got := st.block(sent.AssistantMessageId, block.String()).GetContent(); got != want.String() {
				t.Errorf("subscriber %d: text differs from what was written (%d vs %d bytes)", i, len(got), want.Len())
			}
			if !st.equal(final) {
				t.Errorf("subscriber %d folds to a different state: %s", i, st.diff(final))
			}
			sub.mu.Lock()
			n := 0
			for _, m := range sub.received {
				if m.GetEvent().GetBlockDelta() != nil && !m.GetEvent().Replay {
					n++
				}
			}
			sub.mu.Unlock()
			if n != deltas {
				t.Errorf("subscriber %d received %d deltas, want %d", i, n, deltas)
			}
		}
		testwait.For(t, "the last reconnect", func() bool { return feed.Connects() > int64(kills) })
	})

	t.Run("ConfirmsWALAndDropsSlot", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, setupOptions{feed: feedLogical})
		feed := tb.logicalFeed(t)
		slot := feed.Slot()
		var temporary bool
		if err := tb.pool.QueryRow(ctx, `SELECT temporary FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&temporary); err != nil {
			t.Fatalf("slot %s: %v", slot, err)
		}
		if !temporary {
			t.Errorf("slot %s is not temporary", slot)
		}

		// The feed confirms the commits it received: the slot's
		// confirmed_flush_lsn passes the WAL written before the last one.
		sent, prompt := tb.running(t)
		text := tb.startBlock(t, prompt, "text")
		for range 20 {
			tb.appendText(t, text, "x")
		}
		var before string
		if err := tb.pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&before); err != nil {
			t.Fatal(err)
		}
		tb.mark(t, sent.ConversationId)
		testwait.For(t, "confirmed_flush_lsn to pass "+before, func() bool {
			var passed bool
			err := tb.pool.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn >= $2::pg_lsn, false)
				FROM pg_replication_slots WHERE slot_name = $1`, slot, before).Scan(&passed)
			if err != nil {
				t.Fatal(err)
			}
			return passed
		})

		tb.stop()
		testwait.For(t, "the slot to be dropped", func() bool {
			var n int
			if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 0
		})
	})

	// With the logical feed the database's events stop notifying; with the
	// NOTIFY feed (the control) they notify.
	t.Run("EventsNotifyOnlyWithNotifyFeed", func(t *testing.T) {
		t.Parallel()
		forEachFeed(t, testEventsNotify)
	})
}

func testEventsNotify(t *testing.T, feed string) {
	ctx := context.Background()
	tb := setup(t, setupOptions{feed: feed})
	// A session of its own, LISTEN needs one.
	conn, err := pgx.Connect(ctx, tb.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "LISTEN "+stream.EventsChannel); err != nil {
		t.Fatal(err)
	}
	sent := tb.send(t, tb.client, "", "hi")
	tb.mark(t, sent.ConversationId)
	// Notifications of the commits above arrive before the answer to
	// this round trip, and are buffered by the connection.
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	n, _ := conn.WaitForNotification(done)
	if notified := n != nil; notified != (feed == feedNotify) {
		t.Errorf("%s feed: events notify = %v", feed, notified)
	}
}
