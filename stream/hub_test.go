package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/internal/testwait"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/postgres/dbq"
	"github.com/convo-dev/convo/stream"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const listenerApp = "convo-listener-test"

type testBundle struct {
	pool  *pgxpool.Pool
	store *postgres.Store
	q     *dbq.Queries
	api   *apiq.Queries // the SQL API as a worker calls it
	hub   *stream.Hub[struct{}]
	feed  *stream.NotifyFeed
	// snapshots reads the hub's snapshots when hubOptions.snapshotConns
	// is set.
	snapshots *postgres.SnapshotReader
}

type hubOptions struct {
	queueSize int
	// snapshotConns, when set, has the hub read its snapshots through a
	// postgres.SnapshotReader on a pool of that many connections.
	snapshotConns int32
}

func setupDSN(t testing.TB, dsn string, o hubOptions) *testBundle {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	store := postgres.New(pool)
	opts := stream.HubOptions[struct{}]{Store: store, QueueSize: o.queueSize}
	var snapshots *postgres.SnapshotReader
	if o.snapshotConns > 0 {
		cfg := pool.Config().Copy()
		cfg.MaxConns = o.snapshotConns
		snapshotPool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(snapshotPool.Close)
		snapshots = postgres.NewSnapshotReader(snapshotPool)
		opts.Snapshots = snapshots
	}
	hub := stream.NewHub(opts)
	cfg := pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = listenerApp
	feed := &stream.NotifyFeed{ConnConfig: cfg, Hub: hub, PingInterval: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { hub.Run(ctx) })
	wg.Go(func() { feed.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		pool.Close()
	})
	testwait.For(t, "the listener to connect", func() bool { return feed.Connects() > 0 })
	return &testBundle{pool: pool, store: store, q: store.Queries(), api: apiq.New(pool), hub: hub, feed: feed, snapshots: snapshots}
}

func setup(t testing.TB, o hubOptions) *testBundle { return setupDSN(t, pgtest.DSN(t), o) }

// setupWithoutFeed runs a hub with no feed: it reads the log only when a
// test calls Hint or Resync, as if every notification were lost.
func setupWithoutFeed(t testing.TB) *testBundle {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	store := postgres.New(pool)
	hub := stream.NewHub(stream.HubOptions[struct{}]{Store: store})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { hub.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		pool.Close()
	})
	return &testBundle{pool: pool, store: store, q: store.Queries(), api: apiq.New(pool), hub: hub}
}

// reply queues a message and starts its prompt, returning the
// conversation and a streaming text block.
func (tb *testBundle) reply(t testing.TB) (uuid.UUID, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	res, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: "local", Text: "go", ModelConfigs: []json.RawMessage{json.RawMessage(`{}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.api.PromptStart(ctx, res.PromptIDs[0]); err != nil {
		t.Fatal(err)
	}
	block, err := tb.api.BlockStart(ctx, apiq.BlockStartParams{PromptID: res.PromptIDs[0], BlockType: "text", Metadata: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return res.ConversationID, block
}

// follower drains a subscription in the background, recording seqs and
// delta text.
type follower struct {
	mu sync.Mutex
	// start is the seq the subscription started at: its snapshot's, or
	// the seq it resumed after.
	start int64
	seqs  []int64
	text  string
	err   error
	sub   *stream.Subscription[struct{}]
	done  chan struct{}
	last  int64
	reach chan struct{}
}

func (tb *testBundle) follow(t testing.TB, conversationID uuid.UUID, afterSeq *int64) *follower {
	t.Helper()
	f, stop, err := tb.startFollower(conversationID, afterSeq)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return f
}

// startFollower opens a subscription and drains it in the background
// until stop; it may run on any goroutine.
func (tb *testBundle) startFollower(conversationID uuid.UUID, afterSeq *int64) (f *follower, stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	sub, err := tb.hub.Open(ctx, stream.OpenParams{OwnerID: "local", ConversationID: conversationID, AfterSeq: afterSeq})
	if err != nil {
		cancel()
		return nil, nil, err
	}
	f = &follower{sub: sub, done: make(chan struct{}), reach: make(chan struct{}, 1)}
	f.start = sub.Cursor()
	if st, ok := sub.Snapshot(); ok {
		f.last = st.Seq
		for _, b := range st.Streaming() {
			f.text += b.Content
		}
	}
	go func() {
		defer close(f.done)
		defer sub.Close()
		for {
			item, err := sub.Next(ctx)
			f.mu.Lock()
			if err != nil {
				f.err = err
				f.mu.Unlock()
				return
			}
			f.seqs = append(f.seqs, item.Event.Seq)
			f.last = item.Event.Seq
			if item.Event.Kind == conversation.EventBlockDelta {
				f.text += deltaText(item.Event)
			}
			f.mu.Unlock()
			select {
			case f.reach <- struct{}{}:
			default:
			}
		}
	}()
	return f, func() { cancel(); <-f.done }, nil
}

// waitSeq waits until the follower received seq.
func (f *follower) waitSeq(t testing.TB, seq int64, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		f.mu.Lock()
		last, err := f.last, f.err
		f.mu.Unlock()
		if last >= seq {
			return
		}
		if err != nil {
			t.Fatalf("subscription ended at seq %d (want %d): %v", last, seq, err)
		}
		select {
		case <-f.reach:
		case <-deadline:
			t.Fatalf("subscription at seq %d after %v, want %d", last, timeout, seq)
		}
	}
}

// checkContiguous asserts the follower saw from..to exactly once, in order.
func (f *follower) checkContiguous(t testing.TB, from, to int64) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if int64(len(f.seqs)) != to-from+1 {
		t.Fatalf("received %d events, want %d (%d..%d)", len(f.seqs), to-from+1, from, to)
	}
	for i, s := range f.seqs {
		if s != from+int64(i) {
			t.Fatalf("event %d has seq %d, want %d", i, s, from+int64(i))
		}
	}
}

func (tb *testBundle) lastSeq(t testing.TB, id uuid.UUID) int64 {
	t.Helper()
	c, err := tb.store.Conversation(context.Background(), "local", id)
	if err != nil {
		t.Fatal(err)
	}
	return c.LastSeq
}

func TestThousandSubscribers(t *testing.T) {
	t.Parallel()
	tb := setup(t, hubOptions{})
	conv, block := tb.reply(t)
	ctx := context.Background()

	backends := func() int {
		var n int
		if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var followers []*follower
	for range 10 {
		followers = append(followers, tb.follow(t, conv, nil))
	}
	withTen := backends()
	start := tb.lastSeq(t, conv)
	for range 990 {
		followers = append(followers, tb.follow(t, conv, nil))
	}
	// Subscribers share the feed's one connection and the pool: the
	// backends are bounded by those (the pool may open another for a
	// concurrent read), never by the subscribers.
	withThousand := backends()
	if limit := int(tb.pool.Config().MaxConns) + 1; withTen > limit || withThousand > limit {
		t.Errorf("database connections: %d with 10 subscribers, %d with 1,000; want at most the pool's %d and the feed's 1",
			withTen, withThousand, limit-1)
	}
	if st := tb.hub.Stats(); st.Subscribers != 1000 || st.Topics != 1 {
		t.Fatalf("hub = %+v", st)
	}
	const deltas = 200
	for i := range deltas {
		if err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: block, Delta: fmt.Sprintf("<%d>", i)}); err != nil {
			t.Fatal(err)
		}
	}
	end := tb.lastSeq(t, conv)
	for _, f := range followers {
		f.waitSeq(t, end, 30*time.Second)
	}
	// Every subscriber saw the same sequence: every event after where it
	// started, once, in order, and the same text.
	want := followers[0].text
	for i, f := range followers {
		f.mu.Lock()
		first := f.seqs[0]
		f.mu.Unlock()
		if first > start+1 {
			t.Fatalf("subscriber %d started at %d, after the writes began at %d", i, first, start+1)
		}
		f.checkContiguous(t, first, end)
		if f.text != want {
			t.Fatalf("subscriber %d has different text", i)
		}
	}
}

// TestListenerTerminated kills the LISTEN connection repeatedly during a
// 1,000-delta reply: notifications sent while it is away are lost, and the
// resync after each reconnect must make up for them.
func TestListenerTerminated(t *testing.T) {
	t.Parallel()
	tb := setup(t, hubOptions{})
	conv, block := tb.reply(t)
	ctx := context.Background()
	var followers []*follower
	for range 5 {
		followers = append(followers, tb.follow(t, conv, nil))
	}
	start := followers[0].last
	var want string
	kills := 0
	for i := range 1000 {
		d := fmt.Sprintf("%d,", i)
		want += d
		if err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: block, Delta: d}); err != nil {
			t.Fatal(err)
		}
		if i%100 == 50 {
			// Kill it once it is back from the previous kill.
			testwait.For(t, "the listener to reconnect", func() bool { return tb.feed.Connects() > int64(kills) })
			var n int
			if err := tb.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE application_name = $1 AND datname = current_database()`, listenerApp).Scan(&n); err != nil {
				t.Fatal(err)
			}
			kills += n
		}
	}
	if kills < 10 {
		t.Fatalf("terminated the listener only %d times", kills)
	}
	end := tb.lastSeq(t, conv)
	for i, f := range followers {
		f.waitSeq(t, end, 30*time.Second)
		f.checkContiguous(t, start+1, end)
		if f.text != want {
			t.Errorf("subscriber %d text differs (%d bytes, want %d)", i, len(f.text), len(want))
		}
	}
	// It reconnected (a kill can hit a connection already closing, so
	// the counts need not match one for one).
	if c := tb.feed.Connects(); c < 2 {
		t.Errorf("listener connected %d times after %d kills", c, kills)
	}
}

// TestSlowSubscriberIsCutOff checks that a subscriber that does not read
// is cut off with ErrFellBehind, without slowing a fast one, and can
// resume after its last event.
func TestSlowSubscriberIsCutOff(t *testing.T) {
	t.Parallel()
	tb := setup(t, hubOptions{queueSize: 64})
	conv, block := tb.reply(t)
	ctx := context.Background()
	fast := tb.follow(t, conv, nil)
	slow, err := tb.hub.Open(ctx, stream.OpenParams{OwnerID: "local", ConversationID: conv})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	// The fast one gets each event before the next is written, so that it
	// never falls behind itself on a loaded machine; the slow one's queue
	// grows by one each time.
	end := tb.lastSeq(t, conv)
	for i := range 300 {
		if err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: block, Delta: fmt.Sprintf("%d ", i)}); err != nil {
			t.Fatal(err)
		}
		end++
		fast.waitSeq(t, end, 30*time.Second)
	}
	if last := tb.lastSeq(t, conv); last != end {
		t.Fatalf("the log ends at seq %d, want %d (one event per append)", last, end)
	}

	// The slow one gets what was queued before the cut, then the error.
	var got int
	for {
		_, err := slow.Next(ctx)
		if err != nil {
			if !errors.Is(err, stream.ErrFellBehind) {
				t.Fatalf("slow subscriber ended with %v, want ErrFellBehind", err)
			}
			break
		}
		got++
	}
	if got == 0 || got > 64 {
		t.Fatalf("slow subscriber got %d events before the cut, want 1..64", got)
	}
	// The error says where to resume: after its last event.
	after := slow.Cursor()
	_, endErr := slow.Next(ctx)
	if at, ok := conversation.ErrorResume(endErr); !ok || at != after || conversation.ErrorCode(endErr) != conversation.Unavailable {
		t.Fatalf("end error %v: resume (%d, %v), code %s; want resume after %d, unavailable", endErr, at, ok, conversation.ErrorCode(endErr), after)
	}
	// It resumes there and gets the rest.
	resumed := tb.follow(t, conv, &after)
	resumed.waitSeq(t, end, 30*time.Second)
	resumed.checkContiguous(t, after+1, end)
}

func deltaText(e conversation.Event) string {
	var d struct{ Content string }
	_ = json.Unmarshal(e.Payload, &d)
	return d.Content
}

// TestDeletionMissedWhileAway deletes a followed conversation while the
// feed is away (its notification is lost): the catch-up after the feed
// reconnects ends the conversation's streams with ErrDeleted.
func TestDeletionMissedWhileAway(t *testing.T) {
	t.Parallel()
	tb := setupWithoutFeed(t)
	conv, _ := tb.reply(t)
	f := tb.follow(t, conv, nil)
	if err := tb.store.DeleteConversation(context.Background(), "local", conv); err != nil {
		t.Fatal(err)
	}
	tb.hub.Resync() // what a feed does after every (re)connect
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream of the deleted conversation is still open after the catch-up")
	}
	if !errors.Is(f.err, stream.ErrDeleted) {
		t.Errorf("stream ended with %v, want ErrDeleted", f.err)
	}
	if st := tb.hub.Stats(); st.Subscribers != 0 || st.Topics != 0 {
		t.Errorf("hub still holds %+v", st)
	}
}
