package pglisten_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/pglisten"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// recorder is a channel's handler that records what it got.
type recorder struct {
	payloads chan string
	ready    chan struct{}
}

func newRecorder() *recorder {
	return &recorder{payloads: make(chan string, 16), ready: make(chan struct{}, 16)}
}

func (r *recorder) handler() pglisten.Handler {
	return pglisten.Handler{
		Notify: func(p string) { r.payloads <- p },
		Ready:  func() { r.ready <- struct{}{} },
	}
}

func (r *recorder) expectReady(t *testing.T, what string) {
	t.Helper()
	select {
	case <-r.ready:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Ready was not called", what)
	}
}

func (r *recorder) expectPayload(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-r.payloads:
		if got != want {
			t.Fatalf("payload %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("payload %q did not arrive", want)
	}
}

// TestListener checks the one LISTEN connection: several channels (one
// with a name that needs quoting) on it, a channel added while it runs,
// several handlers of one channel, and a reconnect after the backend is
// terminated that calls every Ready hook again.
func TestListener(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := pgtest.Pool(t)
	notify := func(channel, payload string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
			t.Fatal(err)
		}
	}
	l := pglisten.New(pglisten.Options{ConnConfig: pool.Config().ConnConfig, PingInterval: 50 * time.Millisecond})
	events, odd := newRecorder(), newRecorder()
	l.Listen("events", events.handler())
	l.Listen(`odd "chan"`, odd.handler())
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx) })
	defer wg.Wait()
	defer cancel()

	events.expectReady(t, "events")
	odd.expectReady(t, "odd")
	notify("events", "1")
	events.expectPayload(t, "1")
	notify(`odd "chan"`, "2")
	odd.expectPayload(t, "2")

	// A channel added while the listener waits is listened to at once,
	// on the same connection.
	prompts, second := newRecorder(), newRecorder()
	l.Listen("prompts", prompts.handler())
	prompts.expectReady(t, "prompts, added while running")
	l.Listen("prompts", second.handler())
	second.expectReady(t, "a second handler of prompts")
	notify("prompts", "3")
	prompts.expectPayload(t, "3")
	second.expectPayload(t, "3")
	if n := l.Connects(); n != 1 {
		t.Errorf("%d connects, want 1: channels share the connection", n)
	}

	// Pings keep a silent connection (50 ms) without reconnecting.
	time.Sleep(300 * time.Millisecond) // let several pings happen
	if n := l.Connects(); n != 1 {
		t.Errorf("%d connects after silence, want 1", n)
	}

	// The backend goes away: the listener reconnects, listens on every
	// channel again and calls every Ready hook (what was sent meanwhile is
	// lost, so handlers reconcile).
	terminate(t, pool)
	for _, r := range []*recorder{events, odd, prompts, second} {
		r.expectReady(t, "after the reconnect")
	}
	if n := l.Connects(); n != 2 {
		t.Errorf("%d connects, want 2", n)
	}
	notify("events", "4")
	events.expectPayload(t, "4")
	notify("prompts", "5")
	prompts.expectPayload(t, "5")
	second.expectPayload(t, "5")
}

// terminate ends the listener's backend, found by its application_name.
func terminate(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()`, pglisten.ApplicationName).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("terminated %d listener connections, want 1", n)
	}
}
