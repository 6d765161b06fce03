package db_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// burstQueue queues, on tb, a queue of several owners in several states:
// o6 served once before (its turn is later than a new owner's), o3
// holding a running prompt with one more queued, and o1, o2, o4, o5 new,
// with 2, 1, 3 and 1 prompts queued; then o6 queues one more.
func burstQueue(t *testing.T, tb *testBundle) *fairQueue {
	t.Helper()
	f := newFairQueue(tb)
	f.queue(t, "o6", 1)
	_, id := f.claim(t)
	f.complete(t, id)
	f.queue(t, "o3", 1)
	if owner, _ := f.claim(t); owner != "o3" {
		t.Fatalf("claimed %q, want o3", owner)
	}
	f.queue(t, "o3", 1)
	for _, o := range []struct {
		owner string
		n     int
	}{{"o1", 2}, {"o2", 1}, {"o4", 3}, {"o5", 1}, {"o6", 1}} {
		f.queue(t, o.owner, o.n)
	}
	return f
}

// queueState is each owner's place in convo.owner_queue after claims: its
// rank in the turn order, and whether it waits from its oldest claimable
// prompt (or waits for nothing and has none).
func queueState(t *testing.T, tb *testBundle) string {
	t.Helper()
	rows, err := tb.pool.Query(context.Background(), `
		SELECT q.owner_id, rank() OVER (ORDER BY q.last_claimed_at NULLS FIRST),
		       q.waiting_since IS NOT DISTINCT FROM (SELECT min(p.created_at) FROM convo.prompts p
		                                              WHERE p.owner_id = q.owner_id AND p.status = 'queued'
		                                                AND p.worker IS NULL AND NOT p.waiting)
		  FROM convo.owner_queue q ORDER BY q.owner_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var owner string
		var rank int
		var waits bool
		if err := rows.Scan(&owner, &rank, &waits); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s:%d:%v", owner, rank, waits))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}

// TestClaimPromptsIdleOwnersAsClaimByClaim checks that claim_prompts,
// which serves the owners who hold nothing in one pass, claims what as
// many calls of claim_prompt (one claim each) claim, in the same order,
// and leaves every owner's turn and wait as they leave them: two
// databases with the same queue, one claimed in one call, the other
// claim by claim.
func TestClaimPromptsIdleOwnersAsClaimByClaim(t *testing.T) {
	t.Parallel()
	one, each := setup(t), setup(t)
	fOne, fEach := burstQueue(t, one), burstQueue(t, each)
	const n = 8 // the five who hold nothing, then three of the backlogs
	got := fOne.claimMany(t, "w1", n, 0)
	var want []string
	for range n {
		claimed, err := each.api.PromptClaim(context.Background(), apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim_prompt = %v, %v", claimed, err)
		}
		want = append(want, fEach.owners[claimed[0].PromptID])
	}
	if got != strings.Join(want, " ") {
		t.Errorf("claim_prompts claimed the prompts of %q, claim by claim %q", got, strings.Join(want, " "))
	}
	if !strings.HasPrefix(got, "o1 o2 o4 o5 o6 ") {
		t.Errorf("claim_prompts claimed %q; want the owners who hold nothing first, new ones before o6", got)
	}
	if a, b := queueState(t, one), queueState(t, each); a != b {
		t.Errorf("owner_queue after claim_prompts:\n  %s\nclaim by claim:\n  %s", a, b)
	}
	// And both go on alike.
	if a, b := fOne.claimMany(t, "w1", 10, 0), fEach.claimMany(t, "w1", 10, 0); a != b {
		t.Errorf("the next claims: %q after claim_prompts, %q after claim_prompt", a, b)
	}
}

// TestClaimPromptsBurstInOnePass checks that a burst of prompts of owners
// who hold nothing (replies of a user each) is claimed in one pass, not
// by one _claim_next per prompt (whose statements cost about a
// millisecond a claim, docs/performance.md), each owner's oldest prompt
// in turn, and that a reserve does not hold them back: they hold nothing.
func TestClaimPromptsBurstInOnePass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	f := newFairQueue(tb)
	var want []string
	for i := range 20 {
		owner := fmt.Sprintf("u%02d", i)
		f.queue(t, owner, 2)
		want = append(want, owner)
	}
	tx, err := tb.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'all'`); err != nil {
		t.Fatal(err)
	}
	claimed, err := apiq.New(tx).PromptClaimMany(ctx, apiq.PromptClaimManyParams{Worker: "w1", LeaseSeconds: 30, MaxPrompts: 20, Reserved: 5})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range claimed {
		got = append(got, f.owners[c.PromptID])
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("claimed the prompts of %v, want one of each owner in turn: %v", got, want)
	}
	var calls int64
	if err := tx.QueryRow(ctx, `SELECT coalesce(pg_stat_get_xact_function_calls('convo._claim_next'::regproc), 0)`).Scan(&calls); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Errorf("claim_prompts called _claim_next %d times for 20 owners who hold nothing; want one pass", calls)
	}
	var oldest int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM convo.prompts p
		WHERE p.worker = 'w1' AND p.created_at = (SELECT min(o.created_at) FROM convo.prompts o WHERE o.owner_id = p.owner_id)`).Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	if oldest != 20 {
		t.Errorf("%d of the 20 claims took their owner's oldest prompt", oldest)
	}
}
