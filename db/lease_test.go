package db_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

func TestLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// expireLease moves a prompt's lease into the past, as if its worker
	// had stopped heartbeating long ago.
	expireLease := func(t *testing.T, tb *testBundle, promptID uuid.UUID) {
		t.Helper()
		if _, err := tb.pool.Exec(ctx, `UPDATE convo.prompts SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, promptID); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("ExpiredRunningPromptFails", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		b := tb.startBlock(t, r.promptID, "text")
		tb.append(t, b, "half")
		expireLease(t, tb, r.promptID)

		// Any claim reaps expired leases first.
		claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w2", LeaseSeconds: 30})
		if err != nil || len(claimed) != 0 {
			t.Fatalf("claim = %+v, %v; want nothing to claim", claimed, err)
		}
		st := tb.state(t, r.conversationID)
		m := st.Messages[1]
		if m.Status != conversation.MessageFailed || m.Blocks[0].Status != conversation.BlockCompleted || m.Blocks[0].Content != "half" {
			t.Errorf("after expiry: message %+v", m)
		}
		events := tb.events(t, r.conversationID)
		var failed conversation.Event
		for _, e := range events {
			if e.Kind == conversation.EventPromptFailed {
				failed = e
			}
		}
		if !strings.Contains(string(failed.Payload), "lease expired: worker w1") {
			t.Errorf("promptFailed payload = %s", failed.Payload)
		}
		keep, err := tb.api.PromptHeartbeat(ctx, apiq.PromptHeartbeatParams{PromptID: r.promptID, Worker: "w1"})
		if err != nil || keep {
			t.Errorf("late heartbeat = %v, %v; want false", keep, err)
		}
	})

	t.Run("ExpiredClaimIsReclaimable", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.sendMessage(t, uuid.Nil, "hi")
		if c, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30}); err != nil || len(c) != 1 {
			t.Fatalf("first claim: %v %+v", err, c)
		}
		// While w1's lease runs, nobody else gets it.
		if c, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w2", LeaseSeconds: 30}); err != nil || len(c) != 0 {
			t.Fatalf("claim during lease: %v %+v", err, c)
		}
		expireLease(t, tb, r.promptID)
		c, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w2", LeaseSeconds: 30})
		if err != nil || len(c) != 1 || c[0].PromptID != r.promptID || c[0].Attempts != 2 {
			t.Fatalf("reclaim = %+v, %v", c, err)
		}
		// w1 lost it.
		if keep, err := tb.api.PromptHeartbeat(ctx, apiq.PromptHeartbeatParams{PromptID: r.promptID, Worker: "w1"}); err != nil || keep {
			t.Errorf("old holder's heartbeat = %v, %v; want false", keep, err)
		}
		if keep, err := tb.api.PromptHeartbeat(ctx, apiq.PromptHeartbeatParams{PromptID: r.promptID, Worker: "w2"}); err != nil || !keep {
			t.Errorf("new holder's heartbeat = %v, %v; want true", keep, err)
		}
	})

	t.Run("HeartbeatExtendsLease", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		expireLease(t, tb, r.promptID)
		if keep, err := tb.api.PromptHeartbeat(ctx, apiq.PromptHeartbeatParams{PromptID: r.promptID, Worker: "w1"}); err != nil || !keep {
			t.Fatalf("heartbeat = %v, %v", keep, err)
		}
		if n, err := tb.q.PromptExpireLeases(ctx); err != nil || n != 0 {
			t.Fatalf("expire after heartbeat = %d, %v; want 0", n, err)
		}
	})

	t.Run("ClaimsNeverShareAPrompt", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		const prompts = 20
		for range prompts {
			tb.sendMessage(t, uuid.Nil, "hi")
		}
		claims := make(chan uuid.UUID, prompts*2)
		errs := make(chan error, 4)
		for w := range 4 {
			go func() {
				for {
					c, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w" + string(rune('a'+w)), LeaseSeconds: 30})
					if err != nil || len(c) == 0 {
						errs <- err
						return
					}
					claims <- c[0].PromptID
				}
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		close(claims)
		seen := map[uuid.UUID]bool{}
		for id := range claims {
			if seen[id] {
				t.Fatalf("prompt %s claimed twice", id)
			}
			seen[id] = true
		}
		if len(seen) != prompts {
			t.Fatalf("claimed %d prompts, want %d", len(seen), prompts)
		}
	})
}

// release_prompt returns a claimed, unstarted prompt to the queue at once,
// and refuses (false, changing nothing) for anyone else's or a running one.
func TestReleasePrompt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.sendMessage(t, uuid.Nil, "hello")
	release := func(worker string) bool {
		t.Helper()
		ok, err := tb.api.PromptRelease(ctx, apiq.PromptReleaseParams{PromptID: r.promptID, Worker: worker})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if release("w1") {
		t.Error("released a prompt nobody claimed")
	}
	if _, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 3600}); err != nil {
		t.Fatal(err)
	}
	before := tb.fingerprint(t)
	if release("w2") || tb.fingerprint(t) != before {
		t.Error("another worker released w1's prompt")
	}
	if !release("w1") {
		t.Fatal("w1 could not release its prompt")
	}
	claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w2", LeaseSeconds: 30})
	if err != nil || len(claimed) != 1 || claimed[0].PromptID != r.promptID {
		t.Fatalf("w2 did not take the released prompt at once: %v %+v", err, claimed)
	}
	if err := tb.api.PromptStart(ctx, r.promptID); err != nil {
		t.Fatal(err)
	}
	before = tb.fingerprint(t)
	if release("w2") || tb.fingerprint(t) != before {
		t.Error("a running prompt was released")
	}
}
