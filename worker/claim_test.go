package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/pglisten"
	"github.com/convo-dev/convo/worker/internal/wdb"

	. "github.com/convo-dev/convo/worker"
)

// failingClaims fails the first fail claims, as a claim does on a pooled
// connection whose server restarted.
type failingClaims struct {
	SQLAPI
	fail  int32
	calls atomic.Int32
}

func (f *failingClaims) PromptClaimMany(ctx context.Context, arg wdb.PromptClaimManyParams) ([]wdb.PromptClaimManyRow, error) {
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

// TestBurstClaimedAFewAtATime: a burst of prompts queued at once is
// claimed a few at a time (a claim's prompts start only when it returns,
// and a claim costs the database a millisecond or more a prompt), not 40
// in one claim; the first claim takes claimFirst (8), the later ones
// what was measured to claim in about claimTarget (25 ms), and every
// prompt runs. The claims are made to cost 5 ms a prompt, so that the
// sizes do not depend on the machine's speed: every later claim asks
// for at most 25 / 5 prompts.
func TestBurstClaimedAFewAtATime(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	const n = 40
	rows, err := tb.db.Query(context.Background(), `SELECT p.prompt_ids[1] FROM generate_series(1, $1) i,
		LATERAL convo.send_message('user' || i, NULL, 'go', '[{"model": "test"}]') p`, n)
	if err != nil {
		t.Fatal(err)
	}
	prompts, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil || len(prompts) != n {
		t.Fatalf("queued %d: %v", len(prompts), err)
	}
	api, wrap := newCountingAPI()
	const perPrompt = 5 * time.Millisecond
	api.claimDelay = perPrompt
	_, res := tb.start(t, WithWrapAPI(Config{Workers: 100, Models: modelsWith(pacedModel(fastTokens(3), time.Millisecond))}, wrap))
	for _, id := range prompts {
		if r := res.wait(t, id, time.Minute); r.Outcome != OutcomeCompleted {
			t.Fatalf("prompt %s: %s: %v", id, r.Outcome, r.Err)
		}
	}
	sizes := api.claimSizes()
	took := 0
	for _, s := range sizes {
		took += s[1]
	}
	if len(sizes) == 0 || sizes[0][0] != ClaimFirst || took != n || len(sizes) < n/8 {
		t.Errorf("claims (asked for, took): %v; want the first of %d and %d prompts in at least %d claims", sizes, ClaimFirst, n, n/8)
	}
	for _, s := range sizes[min(1, len(sizes)):] {
		if bound := max(int(ClaimTarget/perPrompt), ClaimMin); s[0] > bound {
			t.Errorf("claims (asked for, took): %v; want every claim after the first to ask for at most %d (%v a prompt)", sizes, bound, perPrompt)
			break
		}
	}
	t.Logf("claims (asked for, took): %v", sizes)
}
