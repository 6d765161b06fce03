package db_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// fairQueue is a queue of several owners' prompts for the claim-order
// tests: it remembers whose each prompt is.
type fairQueue struct {
	tb     *testBundle
	owners map[uuid.UUID]string
}

func newFairQueue(tb *testBundle) *fairQueue {
	return &fairQueue{tb: tb, owners: map[uuid.UUID]string{}}
}

// queue sends n prompts as owner, each in a conversation of its own.
func (f *fairQueue) queue(t *testing.T, owner string, n int) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	for range n {
		res, err := f.tb.send(context.Background(), owner, uuid.Nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		f.owners[res.PromptIDs[0]] = owner
		ids = append(ids, res.PromptIDs[0])
	}
	return ids
}

// claim claims one prompt as worker "w1" and starts it; "" when none.
func (f *fairQueue) claim(t *testing.T) (string, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	claimed, err := f.tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) == 0 {
		return "", uuid.Nil
	}
	if err := f.tb.api.PromptStart(ctx, claimed[0].PromptID); err != nil {
		t.Fatal(err)
	}
	return f.owners[claimed[0].PromptID], claimed[0].PromptID
}

// claims claims n prompts one at a time, starting each, and returns their
// owners in the order claimed.
func (f *fairQueue) claims(t *testing.T, n int) (string, []uuid.UUID) {
	t.Helper()
	var owners []string
	var ids []uuid.UUID
	for range n {
		owner, id := f.claim(t)
		if owner == "" {
			break
		}
		owners = append(owners, owner)
		ids = append(ids, id)
	}
	return strings.Join(owners, " "), ids
}

// claimMany calls claim_prompts(worker, 30, n, reserved) and returns the
// owners of the prompts it claimed, in order.
func (f *fairQueue) claimMany(t *testing.T, worker string, n, reserved int) string {
	t.Helper()
	claimed, err := f.tb.api.PromptClaimMany(context.Background(), apiq.PromptClaimManyParams{
		Worker: worker, LeaseSeconds: 30, MaxPrompts: int32(n), Reserved: int32(reserved),
	})
	if err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, c := range claimed {
		owners = append(owners, f.owners[c.PromptID])
	}
	return strings.Join(owners, " ")
}

func (f *fairQueue) complete(t *testing.T, ids ...uuid.UUID) {
	t.Helper()
	for _, id := range ids {
		if err := f.tb.api.PromptComplete(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFairSlots checks the claim order of convo.claim_prompt and
// convo.claim_prompts given what each owner holds (running, or claimed)
// and what it has queued: the waiting owner who holds the fewest prompts
// first, ties to the owner served least recently; and the reserve of
// claim_prompts, which only owners holding nothing may take.
func TestFairSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("FewestHeldFirst", func(t *testing.T) {
		t.Parallel()
		f := newFairQueue(setup(t))
		f.queue(t, "alice", 6)
		f.queue(t, "bob", 4)
		f.queue(t, "carol", 4)
		// Nobody holds anything: one each, in the order they queued,
		// then again in the order they were served.
		got, ids := f.claims(t, 6)
		if want := "alice bob carol alice bob carol"; got != want {
			t.Fatalf("first claims %q, want %q", got, want)
		}
		// bob's replies end, and one of carol's: alice holds 2, carol 1,
		// bob none. (Served least recently: alice, then bob, then carol.)
		f.complete(t, ids[1], ids[4], ids[2])
		// bob (none held); carol (1, like bob, but served longer ago);
		// bob (1); alice (2, like carol, served longer ago); carol (2);
		// then alice's last three (bob and carol have none left).
		want := "bob carol bob alice carol alice alice alice"
		if got, _ := f.claims(t, 8); got != want {
			t.Errorf("claims %q, want %q", got, want)
		}
	})

	t.Run("ClaimManyCountsItsOwnClaims", func(t *testing.T) {
		t.Parallel()
		f := newFairQueue(setup(t))
		f.queue(t, "alice", 5)
		if got := f.claimMany(t, "w0", 3, 0); got != "alice alice alice" {
			t.Fatalf("claimed %q", got)
		}
		f.queue(t, "bob", 3)
		f.queue(t, "carol", 1)
		// alice holds 3: bob and carol (none) first, then bob (1, 2)
		// until his queue is empty, then alice's last two.
		if got, want := f.claimMany(t, "w1", 100, 0), "bob carol bob bob alice alice"; got != want {
			t.Errorf("claimed %q, want %q", got, want)
		}
	})

	t.Run("ReservedSlotsOnlyForOwnersHoldingNothing", func(t *testing.T) {
		t.Parallel()
		f := newFairQueue(setup(t))
		f.queue(t, "alice", 10)
		// Four free slots, one reserved: alice's backlog takes three.
		if got := f.claimMany(t, "w1", 4, 1); got != "alice alice alice" {
			t.Fatalf("a flood took %q of 4 slots, 1 reserved; want 3", got)
		}
		if got := f.claimMany(t, "w1", 1, 1); got != "" {
			t.Fatalf("the reserved slot went to %q, who holds prompts", got)
		}
		// bob sends his first prompt: the reserved slot is his.
		f.queue(t, "bob", 2)
		f.queue(t, "carol", 1)
		if got := f.claimMany(t, "w1", 1, 1); got != "bob" {
			t.Fatalf("the reserved slot went to %q, want bob", got)
		}
		// Three slots, one reserved: carol (nothing held) first, then
		// bob (1 held) rather than alice (3); the last slot stays free.
		if got := f.claimMany(t, "w1", 3, 1); got != "carol bob" {
			t.Errorf("claimed %q, want %q", got, "carol bob")
		}
		// claim_prompts with three arguments reserves nothing.
		if _, err := f.tb.pool.Exec(ctx, `SELECT * FROM convo.claim_prompts('w1', 30, 1)`); err != nil {
			t.Errorf("claim_prompts with three arguments: %v", err)
		}
		for _, reserved := range []int{-1, 2} {
			_, err := f.tb.api.PromptClaimMany(ctx, apiq.PromptClaimManyParams{Worker: "w1", LeaseSeconds: 30, MaxPrompts: 1, Reserved: int32(reserved)})
			requireSQLState(t, err, sqlstate.InvalidArgument)
			if err != nil && !strings.Contains(err.Error(), "reserved must be between 0 and max_prompts (1)") {
				t.Errorf("reserved %d: %v", reserved, err)
			}
		}
	})

	t.Run("CancelledAndDeletedPromptsAreSkipped", func(t *testing.T) {
		t.Parallel()
		f := newFairQueue(setup(t))
		cancelled := f.queue(t, "alice", 1)
		deleted, err := f.tb.send(ctx, "bob", uuid.Nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		f.queue(t, "carol", 1)
		if ok, err := f.tb.store.CancelPrompt(ctx, "alice", cancelled[0]); err != nil || !ok {
			t.Fatalf("cancel = %v, %v", ok, err)
		}
		if err := f.tb.store.DeleteConversation(ctx, "bob", deleted.ConversationID); err != nil {
			t.Fatal(err)
		}
		if got, _ := f.claims(t, 2); got != "carol" {
			t.Errorf("claims %q, want carol's prompt only", got)
		}
		var waiting int
		if err := f.tb.pool.QueryRow(ctx, `SELECT count(*) FROM convo.owner_queue WHERE waiting_since IS NOT NULL`).Scan(&waiting); err != nil || waiting != 0 {
			t.Errorf("owners still waiting = %d, %v; want 0", waiting, err)
		}
		// alice queues again: she waits again.
		f.queue(t, "alice", 1)
		if got, _ := f.claims(t, 1); got != "alice" {
			t.Errorf("claims %q, want alice", got)
		}
	})

	t.Run("ReleasedPromptIsClaimedAgain", func(t *testing.T) {
		t.Parallel()
		f := newFairQueue(setup(t))
		ids := f.queue(t, "alice", 1)
		if got := f.claimMany(t, "w1", 1, 0); got != "alice" {
			t.Fatalf("claimed %q", got)
		}
		if ok, err := f.tb.api.PromptRelease(ctx, apiq.PromptReleaseParams{PromptID: ids[0], Worker: "w1"}); err != nil || !ok {
			t.Fatalf("release = %v, %v", ok, err)
		}
		if got := f.claimMany(t, "w2", 1, 1); got != "alice" {
			t.Errorf("after release claimed %q; want alice's prompt, and alice holds nothing", got)
		}
	})

	t.Run("OwnerLockedByAnotherClaimIsSkipped", func(t *testing.T) {
		t.Parallel()
		f := newFairQueue(setup(t))
		f.queue(t, "alice", 2)
		f.queue(t, "bob", 1)
		// A claim in an open transaction has served alice and holds her
		// turn: another claim takes bob's prompt, without waiting, rather
		// than alice's second.
		tx, err := f.tb.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		held, err := apiq.New(tx).PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
		if err != nil || len(held) != 1 || f.owners[held[0].PromptID] != "alice" {
			t.Fatalf("held claim = %+v, %v", held, err)
		}
		if got := f.claimMany(t, "w2", 2, 0); got != "bob" {
			t.Errorf("concurrent claim took %q, want bob's prompt only", got)
		}
	})
}

// TestFairSlotsConcurrent sends and claims at once from many connections:
// every prompt is claimed exactly once, no call fails (no deadlock), and
// no owner is left with claimable prompts that convo.owner_queue does not
// list as waiting.
func TestFairSlotsConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	const senders, perSender, claimers = 6, 15, 4
	total := senders * perSender
	var mu sync.Mutex
	claimed := map[uuid.UUID]int{}
	errs := make(chan error, senders+claimers)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for range perSender {
				if _, err := tb.send(ctx, fmt.Sprintf("user%d", s%3), uuid.Nil, 1); err != nil {
					errs <- fmt.Errorf("send: %w", err)
					return
				}
			}
		})
	}
	for c := range claimers {
		wg.Go(func() {
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				done := len(claimed) == total
				mu.Unlock()
				if done {
					return
				}
				rows, err := tb.api.PromptClaimMany(ctx, apiq.PromptClaimManyParams{
					Worker: fmt.Sprintf("w%d", c), LeaseSeconds: 30, MaxPrompts: 3, Reserved: int32(c % 2),
				})
				if err != nil {
					errs <- fmt.Errorf("claim: %w", err)
					return
				}
				for _, r := range rows {
					mu.Lock()
					claimed[r.PromptID]++
					mu.Unlock()
					if err := tb.api.PromptStart(ctx, r.PromptID); err != nil {
						errs <- fmt.Errorf("start: %w", err)
						return
					}
					if err := tb.api.PromptComplete(ctx, r.PromptID); err != nil {
						errs <- fmt.Errorf("complete: %w", err)
						return
					}
				}
			}
			errs <- fmt.Errorf("claimer %d: not every prompt was claimed within 30 s", c)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(claimed) != total {
		t.Errorf("%d prompts claimed, want %d", len(claimed), total)
	}
	for id, n := range claimed {
		if n != 1 {
			t.Errorf("prompt %s claimed %d times", id, n)
		}
	}
	var lost int
	if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM convo.prompts p
		WHERE p.status = 'queued' AND p.worker IS NULL
		  AND NOT EXISTS (SELECT 1 FROM convo.owner_queue q WHERE q.owner_id = p.owner_id AND q.waiting_since <= p.created_at)`).Scan(&lost); err != nil || lost != 0 {
		t.Errorf("claimable prompts whose owner does not wait: %d, %v", lost, err)
	}
}
