package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/pglisten"
	"github.com/convo-dev/convo/postgres/dbq"

	. "github.com/convo-dev/convo/worker"
)

// failingClaims fails the first fail claims, as a claim does on a pooled
// connection whose server restarted.
type failingClaims struct {
	SQLAPI
	fail  int32
	calls atomic.Int32
}

func (f *failingClaims) PromptClaimMany(ctx context.Context, arg dbq.PromptClaimManyParams) ([]dbq.PromptClaimManyRow, error) {
	if f.calls.Add(1) <= f.fail {
		return nil, errors.New("FATAL: terminating connection due to unexpected postmaster exit (SQLSTATE 57P01)")
	}
	return f.SQLAPI.PromptClaimMany(ctx, arg)
}

// TestClaimRetriesAfterAFailedClaim: a prompt queued while claims fail
// (PostgreSQL restarting) is claimed as soon as they work again, not at
// the next poll: no notification is coming for it (the one that woke the
// claim is spent, and those sent while the listener reconnected are lost).
func TestClaimRetriesAfterAFailedClaim(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	s := tb.send(t, uuid.Nil, "What is 6 times 7?", `{}`)
	claims := &failingClaims{fail: 3}
	// A listener that never runs: no notification wakes the claim loop.
	deaf := pglisten.New(pglisten.Options{ConnConfig: tb.db.Config().ConnConfig, Logger: testLogger(t)})
	cfg := WithWrapAPI(Config{PollInterval: time.Hour, Listener: deaf}, func(inner SQLAPI) SQLAPI {
		claims.SQLAPI = inner
		return claims
	})
	_, res := tb.start(t, cfg)
	if r := res.wait(t, s.promptID, 30*time.Second); r.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
	}
	if n := claims.calls.Load(); n < 4 {
		t.Errorf("%d claims, want the 3 failed ones and one more", n)
	}
}
