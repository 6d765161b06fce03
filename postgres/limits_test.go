package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/db"
	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres/dbq"
)

// send sends text as owner, starting a conversation when conversationID is
// uuid.Nil, with one model configuration per prompt to queue.
func (tb *testBundle) send(ctx context.Context, owner string, conversationID uuid.UUID, prompts int) (conversation.SendMessageResult, error) {
	configs := make([]json.RawMessage, prompts)
	for i := range configs {
		configs[i] = json.RawMessage(`{"model":"demo"}`)
	}
	return tb.store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: owner, ConversationID: conversationID, Text: "hello", ModelConfigs: configs,
	})
}

func (tb *testBundle) setCap(t *testing.T, n int) {
	t.Helper()
	if err := tb.store.SetMaxActivePrompts(context.Background(), n); err != nil {
		t.Fatalf("set max active prompts %d: %v", n, err)
	}
}

// requireQuotaExceeded asserts err is the quota error naming its limit.
func requireQuotaExceeded(t *testing.T, err error) {
	t.Helper()
	if conversation.ErrorCode(err) != conversation.ResourceExhausted {
		t.Fatalf("err = %v (code %q); want resource_exhausted", err, conversation.ErrorCode(err))
	}
	if msg := conversation.ErrorMessage(err); !strings.Contains(msg, "max_active_prompts") {
		t.Errorf("message %q does not name the limit", msg)
	}
}

func TestMaxActivePrompts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ReachedRefusedNothingChanged", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		tb.setCap(t, 2)
		first, err := tb.send(ctx, "alice", uuid.Nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.send(ctx, "alice", first.ConversationID, 1); err != nil {
			t.Fatal(err)
		}
		before := tb.fingerprint(t)
		_, err = tb.send(ctx, "alice", first.ConversationID, 1)
		requireQuotaExceeded(t, err)
		// A new conversation is not created either.
		_, err = tb.send(ctx, "alice", uuid.Nil, 1)
		requireQuotaExceeded(t, err)
		if after := tb.fingerprint(t); after != before {
			t.Errorf("a refused send changed the database:\nbefore %s\nafter  %s", before, after)
		}
		// Any client of the SQL function gets the same SQLSTATE.
		_, err = tb.pool.Exec(ctx, `SELECT * FROM convo.send_message('alice', NULL, 'hi', '[{}]')`)
		requireSQLState(t, err, "CV004")
	})

	t.Run("OtherUsersUnaffected", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		tb.setCap(t, 1)
		if _, err := tb.send(ctx, "alice", uuid.Nil, 1); err != nil {
			t.Fatal(err)
		}
		_, err := tb.send(ctx, "alice", uuid.Nil, 1)
		requireQuotaExceeded(t, err)
		if _, err := tb.send(ctx, "bob", uuid.Nil, 1); err != nil {
			t.Errorf("bob is refused because of alice: %v", err)
		}
	})

	t.Run("RunningCountsAndFinishingReleases", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		tb.setCap(t, 2)
		a, err := tb.send(ctx, "alice", uuid.Nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := tb.send(ctx, "alice", uuid.Nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim = %+v, %v", claimed, err)
		}
		if err := tb.api.PromptStart(ctx, claimed[0].PromptID); err != nil {
			t.Fatal(err)
		}
		_, err = tb.send(ctx, "alice", uuid.Nil, 1)
		requireQuotaExceeded(t, err) // one running, one queued
		if err := tb.api.PromptComplete(ctx, claimed[0].PromptID); err != nil {
			t.Fatal(err)
		}
		c, err := tb.send(ctx, "alice", uuid.Nil, 1)
		if err != nil {
			t.Fatalf("after a prompt completed: %v", err)
		}
		_, err = tb.send(ctx, "alice", uuid.Nil, 1)
		requireQuotaExceeded(t, err)
		// Cancelling releases too.
		other := a.PromptIDs[0]
		if other == claimed[0].PromptID {
			other = b.PromptIDs[0]
		}
		if _, err := tb.store.CancelPrompt(ctx, "alice", other); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.send(ctx, "alice", c.ConversationID, 1); err != nil {
			t.Fatalf("after a prompt was cancelled: %v", err)
		}
	})

	t.Run("RegenerateCountsToo", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		tb.setCap(t, 1)
		finish := func(t *testing.T) {
			t.Helper()
			claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
			if err != nil || len(claimed) != 1 {
				t.Fatalf("claim = %+v, %v", claimed, err)
			}
			if err := tb.api.PromptStart(ctx, claimed[0].PromptID); err != nil {
				t.Fatal(err)
			}
			if err := tb.api.PromptComplete(ctx, claimed[0].PromptID); err != nil {
				t.Fatal(err)
			}
		}
		a, err := tb.send(ctx, "alice", uuid.Nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		finish(t)
		if _, err := tb.send(ctx, "alice", uuid.Nil, 1); err != nil {
			t.Fatal(err)
		}
		before := tb.fingerprint(t)
		_, err = tb.store.RegenerateReply(ctx, conversation.RegenerateParams{OwnerID: "alice", ConversationID: a.ConversationID})
		requireQuotaExceeded(t, err)
		if after := tb.fingerprint(t); after != before {
			t.Errorf("a refused regenerate changed the database:\nbefore %s\nafter  %s", before, after)
		}
		finish(t)
		if _, err := tb.store.RegenerateReply(ctx, conversation.RegenerateParams{OwnerID: "alice", ConversationID: a.ConversationID}); err != nil {
			t.Errorf("regenerate once the other reply finished: %v", err)
		}
	})

	t.Run("ComparisonCountsBothPrompts", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		tb.setCap(t, 2)
		if _, err := tb.send(ctx, "alice", uuid.Nil, 1); err != nil {
			t.Fatal(err)
		}
		_, err := tb.send(ctx, "alice", uuid.Nil, 2)
		requireQuotaExceeded(t, err)
		if _, err := tb.send(ctx, "bob", uuid.Nil, 2); err != nil {
			t.Errorf("a comparison within the cap: %v", err)
		}
	})

	t.Run("ConcurrentSendsCannotPassTheCap", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		tb.setCap(t, 3)
		// Every send on its own connection, as from several servers.
		const senders = 12
		var wg sync.WaitGroup
		var mu sync.Mutex
		var accepted, refused int
		start := make(chan struct{})
		for range senders {
			wg.Go(func() {
				<-start
				_, err := tb.send(ctx, "alice", uuid.Nil, 1)
				mu.Lock()
				defer mu.Unlock()
				switch conversation.ErrorCode(err) {
				case "":
					accepted++
				case conversation.ResourceExhausted:
					refused++
				default:
					t.Errorf("send: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if accepted != 3 || refused != senders-3 {
			t.Errorf("accepted %d, refused %d; want 3 and %d", accepted, refused, senders-3)
		}
		var active int
		if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM convo.prompts WHERE status = 'queued'`).Scan(&active); err != nil || active != 3 {
			t.Errorf("queued prompts = %d, %v; want 3", active, err)
		}
	})

	// A request for another owner's conversation, or one that does not
	// exist, answers not_found whatever the caller's quota: ownership is
	// checked before the quota, so such a request costs nothing (not the
	// quota's per-owner lock either) and never tells "over the cap"
	// about a conversation the caller cannot see.
	t.Run("NotFoundBeforeQuota", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		tb.setCap(t, 1)
		bobs, err := tb.send(ctx, "bob", uuid.Nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.q.PromptCancel(ctx, dbq.PromptCancelParams{PromptID: bobs.PromptIDs[0], UserID: "bob"}); err != nil {
			t.Fatal(err)
		}
		hers, err := tb.send(ctx, "alice", uuid.Nil, 1)
		if err != nil {
			t.Fatal(err) // alice is at her cap now
		}
		before := tb.fingerprint(t)
		for _, conv := range []uuid.UUID{bobs.ConversationID, uuid.New()} {
			for name, call := range map[string]func() error{
				"send": func() error { _, err := tb.send(ctx, "alice", conv, 1); return err },
				"edit": func() error {
					_, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "alice", ConversationID: conv, MessageID: bobs.UserMessageID, Text: "mine now"})
					return err
				},
				"regenerate": func() error {
					_, err := tb.store.RegenerateReply(ctx, conversation.RegenerateParams{OwnerID: "alice", ConversationID: conv})
					return err
				},
			} {
				if err := call(); conversation.ErrorCode(err) != conversation.NotFound {
					t.Errorf("%s in conversation %s (not alice's) over alice's cap: %v (code %q); want not_found", name, conv, err, conversation.ErrorCode(err))
				}
			}
		}
		if after := tb.fingerprint(t); after != before {
			t.Errorf("refused requests changed the database:\nbefore %s\nafter  %s", before, after)
		}
		// Her own conversation: the quota, as before.
		_, err = tb.send(ctx, "alice", hers.ConversationID, 1)
		requireQuotaExceeded(t, err)
	})

	t.Run("ZeroIsNoCap", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		tb.setCap(t, 0)
		for i := range 10 {
			if _, err := tb.send(ctx, "alice", uuid.Nil, 1); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
	})

	t.Run("NegativeCapIsInvalid", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		err := tb.store.SetMaxActivePrompts(ctx, -1)
		if conversation.ErrorCode(err) != conversation.Invalid {
			t.Errorf("SetMaxActivePrompts(-1) = %v; want invalid", err)
		}
	})
}

func TestFairClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// owners maps each prompt to its owner.
	queue := func(t *testing.T, tb *testBundle, owner string, n int, owners map[uuid.UUID]string, order *[]uuid.UUID) {
		t.Helper()
		// Each in a conversation of its own: one conversation answers one
		// message at a time (a second send waits its turn, not claimable).
		for range n {
			res, err := tb.send(ctx, owner, uuid.Nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			owners[res.PromptIDs[0]] = owner
			*order = append(*order, res.PromptIDs[0])
		}
	}

	t.Run("RoundRobinAcrossThreeUsersWithOneWorker", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		owners := map[uuid.UUID]string{}
		var order []uuid.UUID
		// alice queues a backlog first; bob and carol come after.
		queue(t, tb, "alice", 4, owners, &order)
		queue(t, tb, "bob", 3, owners, &order)
		queue(t, tb, "carol", 2, owners, &order)

		var served []string
		var servedIDs []uuid.UUID
		for {
			claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
			if err != nil {
				t.Fatal(err)
			}
			if len(claimed) == 0 {
				break
			}
			id := claimed[0].PromptID
			served = append(served, owners[id])
			servedIDs = append(servedIDs, id)
			if err := tb.api.PromptStart(ctx, id); err != nil {
				t.Fatal(err)
			}
			if err := tb.api.PromptComplete(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		want := "alice bob carol alice bob carol alice bob alice"
		if got := strings.Join(served, " "); got != want {
			t.Errorf("served %s\nwant   %s", got, want)
		}
		// Each owner's prompts oldest first.
		next := map[string]int{}
		for _, id := range servedIDs {
			owner := owners[id]
			var mine []uuid.UUID
			for _, o := range order {
				if owners[o] == owner {
					mine = append(mine, o)
				}
			}
			if mine[next[owner]] != id {
				t.Errorf("%s's prompt %s served out of order", owner, id)
			}
			next[owner]++
		}
	})

	t.Run("ClaimManyTakesTheOrderOfSingleClaims", func(t *testing.T) {
		t.Parallel()
		// The same queue twice: one claims one prompt at a time, the
		// other all at once; both serve the owners in the same order,
		// including an owner served before (carol: last in the round).
		served := func(many bool) string {
			tb := setup(t)
			owners := map[uuid.UUID]string{}
			var order []uuid.UUID
			queue(t, tb, "carol", 1, owners, &order)
			if _, err := tb.api.PromptClaimMany(ctx, apiq.PromptClaimManyParams{Worker: "w0", LeaseSeconds: 30, MaxPrompts: 1}); err != nil {
				t.Fatal(err)
			}
			queue(t, tb, "alice", 3, owners, &order)
			queue(t, tb, "bob", 2, owners, &order)
			queue(t, tb, "carol", 2, owners, &order)
			var got []string
			if many {
				claimed, err := tb.api.PromptClaimMany(ctx, apiq.PromptClaimManyParams{Worker: "w1", LeaseSeconds: 30, MaxPrompts: 100})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range claimed {
					got = append(got, owners[c.PromptID])
				}
				return strings.Join(got, " ")
			}
			for {
				claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
				if err != nil {
					t.Fatal(err)
				}
				if len(claimed) == 0 {
					return strings.Join(got, " ")
				}
				got = append(got, owners[claimed[0].PromptID])
			}
		}
		one, many := served(false), served(true)
		if want := "alice bob carol alice bob carol alice"; one != want || many != want {
			t.Errorf("claims one by one served %q, at once %q; want %q", one, many, want)
		}
	})

	t.Run("ClaimManySkipsLockedAndStopsAtMax", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		owners := map[uuid.UUID]string{}
		var order []uuid.UUID
		queue(t, tb, "alice", 2, owners, &order)
		queue(t, tb, "bob", 2, owners, &order)
		tx, err := tb.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		held, err := apiq.New(tx).PromptClaimMany(ctx, apiq.PromptClaimManyParams{Worker: "w1", LeaseSeconds: 30, MaxPrompts: 1})
		if err != nil || len(held) != 1 || held[0].PromptID != order[0] {
			t.Fatalf("held claim = %+v, %v", held, err)
		}
		// (Claiming alice's second prompt would wait for the held claim's
		// transaction: it records alice's turn.)
		claimed, err := tb.api.PromptClaimMany(ctx, apiq.PromptClaimManyParams{Worker: "w2", LeaseSeconds: 30, MaxPrompts: 1})
		if err != nil || len(claimed) != 1 || claimed[0].PromptID != order[2] {
			t.Fatalf("concurrent claim = %+v, %v; want bob's first prompt only, without waiting", claimed, err)
		}
		_, err = tb.api.PromptClaimMany(ctx, apiq.PromptClaimManyParams{Worker: "w2", LeaseSeconds: 30, MaxPrompts: 0})
		requireSQLState(t, err, sqlstate.InvalidArgument)
	})

	t.Run("NewcomerIsServedBeforeABacklog", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		owners := map[uuid.UUID]string{}
		var order []uuid.UUID
		queue(t, tb, "alice", 3, owners, &order)
		claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
		if err != nil || len(claimed) != 1 || owners[claimed[0].PromptID] != "alice" {
			t.Fatalf("first claim = %+v, %v", claimed, err)
		}
		queue(t, tb, "bob", 1, owners, &order)
		claimed, err = tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w2", LeaseSeconds: 30})
		if err != nil || len(claimed) != 1 || owners[claimed[0].PromptID] != "bob" {
			t.Fatalf("second claim = %+v, %v; want bob's prompt, queued after alice's backlog", claimed, err)
		}
	})

	t.Run("SkipsPromptsLockedByAnotherClaim", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		owners := map[uuid.UUID]string{}
		var order []uuid.UUID
		queue(t, tb, "alice", 1, owners, &order)
		queue(t, tb, "bob", 1, owners, &order)
		// A claim in an open transaction holds alice's prompt locked.
		tx, err := tb.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		held, err := apiq.New(tx).PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
		if err != nil || len(held) != 1 || owners[held[0].PromptID] != "alice" {
			t.Fatalf("held claim = %+v, %v", held, err)
		}
		claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w2", LeaseSeconds: 30})
		if err != nil || len(claimed) != 1 || owners[claimed[0].PromptID] != "bob" {
			t.Fatalf("concurrent claim = %+v, %v; want bob's prompt without waiting", claimed, err)
		}
	})

	t.Run("UnstartedPromptWithExpiredLeaseIsClaimedAgain", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		owners := map[uuid.UUID]string{}
		var order []uuid.UUID
		queue(t, tb, "alice", 1, owners, &order)
		first, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
		if err != nil || len(first) != 1 {
			t.Fatalf("claim = %+v, %v", first, err)
		}
		if _, err := tb.pool.Exec(ctx, `UPDATE convo.prompts SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, first[0].PromptID); err != nil {
			t.Fatal(err)
		}
		again, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w2", LeaseSeconds: 30})
		if err != nil || len(again) != 1 || again[0].PromptID != first[0].PromptID || again[0].Attempts != 2 {
			t.Fatalf("reclaim = %+v, %v; want the same prompt, attempt 2", again, err)
		}
	})
}

// TestPromptLimitsMigrationDown rolls 00010_prompt_limits.sql back with
// prompts queued and forward again: the queue keeps working both ways, and
// the owners of existing prompts are filled in again.
func TestPromptLimitsMigrationDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	if _, err := tb.send(ctx, "alice", uuid.Nil, 1); err != nil {
		t.Fatal(err)
	}
	provider := migrations(t, dsn)
	if _, err := provider.DownTo(ctx, 9); err != nil {
		t.Fatalf("down to 9: %v", err)
	}
	// The pool's cached plans name dropped objects: start afresh.
	tb = setupDSN(t, dsn)
	if _, err := tb.pool.Exec(ctx, `SELECT * FROM convo.send_message('bob', NULL, 'hi', '[{}]')`); err != nil {
		t.Fatalf("send_message after down: %v", err)
	}
	var claimed int
	if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM convo.claim_prompt('w1', 30)`).Scan(&claimed); err != nil || claimed != 1 {
		t.Fatalf("claim after down = %d, %v", claimed, err)
	}

	if _, err := provider.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	// And the functions, as every start applies them after the
	// migrations: the server's send calls send_messages as it is now.
	if err := db.Migrate(ctx, dsn); err != nil {
		t.Fatalf("functions after up: %v", err)
	}
	tb = setupDSN(t, dsn)
	var owners string
	if err := tb.pool.QueryRow(ctx, `SELECT string_agg(owner_id, ',' ORDER BY owner_id) FROM convo.prompts`).Scan(&owners); err != nil || owners != "alice,bob" {
		t.Fatalf("owners after up = %q, %v; want alice,bob", owners, err)
	}
	tb.setCap(t, 1)
	_, err := tb.send(ctx, "bob", uuid.Nil, 1)
	requireQuotaExceeded(t, err)
}
