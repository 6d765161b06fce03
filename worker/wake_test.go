package worker_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/pglisten"

	. "github.com/convo-dev/convo/worker"
)

// TestSendWakesThePool: a pool that polls once an hour claims a prompt
// SendMessage queued at once, woken either by the one 'queued:*'
// notification of the send's transaction, or, with no listener running,
// by the store's hook calling Pool.Wake (a server's own workers).
func TestSendWakesThePool(t *testing.T) {
	t.Parallel()
	t.Run("notification", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		_, res := tb.start(t, Config{PollInterval: time.Hour})
		sendTwice(t, tb, res)
	})
	t.Run("wake", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		// A listener that never runs: no notification wakes the claim loop.
		deaf := pglisten.New(pglisten.Options{ConnConfig: tb.db.Config().ConnConfig, Logger: testLogger(t)})
		p, res := tb.start(t, Config{PollInterval: time.Hour, Listener: deaf})
		tb.store.OnPromptsQueued(p.Wake)
		sendTwice(t, tb, res)
	})
}

// sendTwice sends a message and waits for its reply, then, once the pool
// idles, sends another, whose reply must come well before the next poll.
func sendTwice(t *testing.T, tb *testBundle, res *results) {
	t.Helper()
	first := tb.send(t, uuid.Nil, "first", `{}`)
	if r := res.wait(t, first.promptID, 30*time.Second); r.Outcome != OutcomeCompleted {
		t.Fatalf("first reply: %s: %v", r.Outcome, r.Err)
	}
	// The claim loop looks once more after a prompt ends, finds nothing,
	// and waits for the next wake-up.
	time.Sleep(500 * time.Millisecond)
	second := tb.send(t, first.conversationID, "second", `{}`)
	if r := res.wait(t, second.promptID, 30*time.Second); r.Outcome != OutcomeCompleted {
		t.Fatalf("second reply: %s: %v", r.Outcome, r.Err)
	}
}
