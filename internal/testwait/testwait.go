// Package testwait waits, in tests, for a condition that something else
// makes true: a polled check with a deadline, never a fixed sleep.
package testwait

import (
	"context"
	"testing"
	"time"
)

// Timeout is how long For waits: long enough for a loaded machine running
// the race detector, short enough that a hang fails the test.
const Timeout = 30 * time.Second

// For polls cond every few milliseconds until it holds, and fails the test
// (naming what it waited for) after Timeout.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	Until(t, ctx, what, cond)
}

// Until is For with the deadline of ctx.
func Until(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}
