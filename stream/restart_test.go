package stream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/internal/testwait"
)

// TestDatabaseRestart restarts PostgreSQL in the middle of a reply.
// Streams stay open, and once the database is back every subscriber has
// every event once, in order. Not parallel: the restart drops every
// connection of this test binary.
func TestDatabaseRestart(t *testing.T) {
	cluster := pgtest.Cluster(t)
	tb := setupDSN(t, pgtest.DSN(t), hubOptions{})
	conv, block := tb.reply(t)
	ctx := context.Background()
	followers := []*follower{tb.follow(t, conv, nil), tb.follow(t, conv, nil)}
	start := followers[0].last

	appendRetrying := func(delta string) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: block, Delta: delta})
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("append %q: %v", delta, err)
			}
			time.Sleep(50 * time.Millisecond) // the database is restarting: retry
		}
	}
	var want string
	for i := range 300 {
		if i == 150 {
			if err := cluster.Restart(ctx); err != nil {
				t.Fatalf("restart: %v", err)
			}
		}
		d := fmt.Sprintf("%d;", i)
		want += d
		appendRetrying(d)
	}
	end := tb.lastSeq(t, conv)
	// The restart really cut the listener: it has connected again.
	testwait.For(t, "the listener to reconnect", func() bool { return tb.feed.Connects() >= 2 })
	for i, f := range followers {
		f.waitSeq(t, end, 60*time.Second)
		f.checkContiguous(t, start+1, end)
		if f.text != want {
			t.Errorf("subscriber %d text differs after the restart", i)
		}
	}
}
