package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// TestWorkerLease covers convo.worker_heartbeat, the process lease: the
// prompts a worker claims under it live while it does, and are failed
// (running) or handed back (claimed) once it runs out.
func TestWorkerLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	beat := func(t *testing.T, tb *testBundle, worker string, lease int, starting bool) bool {
		t.Helper()
		live, err := tb.api.WorkerHeartbeat(ctx, apiq.WorkerHeartbeatParams{Worker: worker, LeaseSeconds: int32(lease), Starting: starting})
		if err != nil {
			t.Fatalf("worker_heartbeat(%s): %v", worker, err)
		}
		return live
	}
	// lapse moves the worker's process lease into the past, as if it had
	// stopped heartbeating long ago.
	lapse := func(t *testing.T, tb *testBundle, worker string) {
		t.Helper()
		if _, err := tb.pool.Exec(ctx, `UPDATE convo.workers SET expires_at = now() - interval '1 second' WHERE name = $1`, worker); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(t *testing.T, tb *testBundle, worker string, n int) []uuid.UUID {
		t.Helper()
		rows, err := tb.api.PromptClaimMany(ctx, apiq.PromptClaimManyParams{Worker: worker, LeaseSeconds: 1, MaxPrompts: int32(n)})
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]uuid.UUID, len(rows))
		for i, r := range rows {
			ids[i] = r.PromptID
		}
		return ids
	}
	// lease is the prompt's status, holder and lease ("infinity", "past",
	// "future" or "none").
	lease := func(t *testing.T, tb *testBundle, id uuid.UUID) string {
		t.Helper()
		var status, holder, l string
		if err := tb.pool.QueryRow(ctx, `SELECT status, coalesce(worker, '-'),
				CASE WHEN lease_expires_at IS NULL THEN 'none' WHEN lease_expires_at = 'infinity' THEN 'infinity'
				     WHEN lease_expires_at < now() THEN 'past' ELSE 'future' END
			  FROM convo.prompts WHERE id = $1`, id).Scan(&status, &holder, &l); err != nil {
			t.Fatal(err)
		}
		return status + " " + holder + " " + l
	}

	t.Run("BadArgumentsAreRefused", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		for _, c := range []struct {
			call, want string
		}{
			{`SELECT convo.worker_heartbeat('', 30)`, "worker must be a non-empty name"},
			{`SELECT convo.worker_heartbeat(NULL, 30)`, "worker must be a non-empty name"},
			{`SELECT convo.worker_heartbeat('w1', 0)`, "lease_seconds must be between 1 and 3600, got 0"},
			{`SELECT convo.worker_heartbeat('w1', 3601)`, "lease_seconds must be between 1 and 3600, got 3601"},
			{`SELECT convo.worker_heartbeat('w1', NULL)`, "lease_seconds must be between 1 and 3600, got NULL"},
			{`SELECT convo.worker_heartbeat('w1', 30, NULL)`, "starting must be true or false"},
		} {
			_, err := tb.pool.Exec(ctx, c.call)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "CV003" || !strings.Contains(pgErr.Message, c.want) {
				t.Errorf("%s: %v; want CV003 %q", c.call, err, c.want)
			}
		}
		var n int
		if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM convo.workers`).Scan(&n); err != nil || n != 0 {
			t.Errorf("%d workers after refused calls (%v); want none", n, err)
		}
	})

	t.Run("PromptsLiveWithTheProcessLease", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		if !beat(t, tb, "w1", 30, true) {
			t.Fatal("a new worker's first heartbeat said its lease had run out")
		}
		a, b := tb.sendMessage(t, uuid.Nil, "one"), tb.sendMessage(t, uuid.Nil, "two")
		// The claim's own lease (1 s) does not count: the process lease does.
		if got := claim(t, tb, "w1", 2); len(got) != 2 {
			t.Fatalf("claimed %v", got)
		}
		if err := tb.api.PromptStart(ctx, a.promptID); err != nil {
			t.Fatal(err)
		}
		if got := lease(t, tb, a.promptID); got != "running w1 infinity" {
			t.Errorf("started prompt: %s", got)
		}
		if got := lease(t, tb, b.promptID); got != "queued w1 infinity" {
			t.Errorf("claimed prompt: %s", got)
		}
		// Its trace reads (a lease of 'infinity' is no time.Time).
		if tr, err := tb.store.Trace(ctx, "local", uuid.NullUUID{UUID: a.promptID, Valid: true}, uuid.NullUUID{}); err != nil ||
			tr.Prompt.Status != conversation.PromptRunning {
			t.Errorf("trace of a prompt under a process lease: %+v, %v", tr.Prompt, err)
		}
		// A per-prompt heartbeat changes nothing and says the prompt is w1's.
		if keep, err := tb.api.PromptHeartbeat(ctx, apiq.PromptHeartbeatParams{PromptID: a.promptID, Worker: "w1"}); err != nil || !keep {
			t.Errorf("heartbeat = %v, %v", keep, err)
		}
		if got := lease(t, tb, a.promptID); got != "running w1 infinity" {
			t.Errorf("after a per-prompt heartbeat: %s", got)
		}
		time.Sleep(1100 * time.Millisecond) // past the claim's lease of 1 s
		if n, err := tb.q.PromptExpireLeases(ctx); err != nil || n != 0 {
			t.Errorf("expire_leases = %d, %v; want nothing failed", n, err)
		}
		var before, after time.Time
		if err := tb.pool.QueryRow(ctx, `SELECT expires_at FROM convo.workers WHERE name = 'w1'`).Scan(&before); err != nil {
			t.Fatal(err)
		}
		if !beat(t, tb, "w1", 30, false) {
			t.Error("a live lease's heartbeat said it had run out")
		}
		if err := tb.pool.QueryRow(ctx, `SELECT expires_at FROM convo.workers WHERE name = 'w1'`).Scan(&after); err != nil || !after.After(before) {
			t.Errorf("expires_at %s -> %s (%v): not extended", before, after, err)
		}
		if got := lease(t, tb, b.promptID); got != "queued w1 infinity" {
			t.Errorf("after 1.1 s: %s", got)
		}
	})

	t.Run("LapsedLeaseFailsRunningAndHandsBackClaimed", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		beat(t, tb, "w1", 30, true)
		a, b := tb.sendMessage(t, uuid.Nil, "one"), tb.sendMessage(t, uuid.Nil, "two")
		claim(t, tb, "w1", 2)
		if err := tb.api.PromptStart(ctx, a.promptID); err != nil {
			t.Fatal(err)
		}
		tb.append(t, tb.startBlock(t, a.promptID, "text"), "half")
		lapse(t, tb, "w1")

		if n, err := tb.q.PromptExpireLeases(ctx); err != nil || n != 1 {
			t.Fatalf("expire_leases = %d, %v; want 1 failed", n, err)
		}
		if st, errText := promptStatus(t, tb, a.promptID); st != "failed" || errText != "lease expired: worker w1 stopped heartbeating" {
			t.Errorf("running prompt: %s %q", st, errText)
		}
		m := tb.state(t, a.conversationID).Messages[1]
		if m.Status != conversation.MessageFailed || m.Blocks[0].Content != "half" {
			t.Errorf("its message: %+v", m)
		}
		if got := lease(t, tb, b.promptID); got != "queued - none" {
			t.Errorf("claimed prompt: %s; want back in the queue", got)
		}
		var expired bool
		if err := tb.pool.QueryRow(ctx, `SELECT expired FROM convo.workers WHERE name = 'w1'`).Scan(&expired); err != nil || !expired {
			t.Errorf("w1 expired = %v, %v", expired, err)
		}
		// Another worker takes the handed-back prompt.
		if got := claim(t, tb, "w2", 1); len(got) != 1 || got[0] != b.promptID {
			t.Errorf("w2 claimed %v; want %s", got, b.promptID)
		}
		// w1 comes back: it learns its prompts are gone, and holds a new
		// lease for its next claims.
		if beat(t, tb, "w1", 30, false) {
			t.Error("the heartbeat after the lease ran out said it was live")
		}
		if !beat(t, tb, "w1", 30, false) {
			t.Error("the next heartbeat said the new lease had run out")
		}
		c := tb.sendMessage(t, uuid.Nil, "three")
		if got := claim(t, tb, "w1", 1); len(got) != 1 || lease(t, tb, c.promptID) != "queued w1 infinity" {
			t.Errorf("w1's claim under its new lease: %v, %s", got, lease(t, tb, c.promptID))
		}
		// Its writes to the failed prompt are refused.
		if refused, err := tb.writeBatch(t, 1, batchOp{"op": "start_block", "prompt": a.promptID, "block": uuid.New(), "type": "text"}); err != nil ||
			len(refused) != 1 || refused[0].Code != "CV002" {
			t.Errorf("w1's write to its failed prompt: %+v, %v; want refused (CV002)", refused, err)
		}
	})

	t.Run("LateHeartbeatLetsGoBeforeTheReaper", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		beat(t, tb, "w1", 30, true)
		a := tb.sendMessage(t, uuid.Nil, "one")
		claim(t, tb, "w1", 1)
		if err := tb.api.PromptStart(ctx, a.promptID); err != nil {
			t.Fatal(err)
		}
		lapse(t, tb, "w1")
		// No expire_leases ran: the heartbeat finds its own lease run out.
		if beat(t, tb, "w1", 30, false) {
			t.Fatal("a heartbeat after the lease ran out said it was live")
		}
		if got := lease(t, tb, a.promptID); got != "running w1 past" {
			t.Errorf("after the late heartbeat: %s; want its own, expired lease", got)
		}
		if n, err := tb.q.PromptExpireLeases(ctx); err != nil || n != 1 {
			t.Errorf("expire_leases = %d, %v; want 1 failed", n, err)
		}
	})

	t.Run("StartingProcessLetsGoTheDeadOneOfItsName", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		beat(t, tb, "w1", 30, true)
		a := tb.sendMessage(t, uuid.Nil, "one")
		claim(t, tb, "w1", 1)
		if err := tb.api.PromptStart(ctx, a.promptID); err != nil {
			t.Fatal(err)
		}
		// The process died and another starts under its name, within the
		// first one's lease.
		if !beat(t, tb, "w1", 30, true) {
			t.Error("a starting process's heartbeat said false")
		}
		if n, err := tb.q.PromptExpireLeases(ctx); err != nil || n != 1 {
			t.Errorf("expire_leases = %d, %v; want the dead process's prompt failed", n, err)
		}
		if st, _ := promptStatus(t, tb, a.promptID); st != "failed" {
			t.Errorf("the dead process's prompt is %s", st)
		}
	})

	t.Run("PerPromptLeaseWithoutAProcessLease", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		a := tb.sendMessage(t, uuid.Nil, "one")
		claim(t, tb, "w1", 1)
		if err := tb.api.PromptStart(ctx, a.promptID); err != nil {
			t.Fatal(err)
		}
		if got := lease(t, tb, a.promptID); got != "running w1 future" {
			t.Fatalf("a simple SQL worker's prompt: %s", got)
		}
		time.Sleep(600 * time.Millisecond)
		if keep, err := tb.api.PromptHeartbeat(ctx, apiq.PromptHeartbeatParams{PromptID: a.promptID, Worker: "w1"}); err != nil || !keep {
			t.Fatalf("heartbeat = %v, %v", keep, err)
		}
		time.Sleep(600 * time.Millisecond) // 1.2 s after the start, 0.6 s after the heartbeat
		if n, err := tb.q.PromptExpireLeases(ctx); err != nil || n != 0 {
			t.Errorf("expire_leases = %d, %v: the heartbeat did not extend the lease", n, err)
		}
		time.Sleep(600 * time.Millisecond)
		if n, err := tb.q.PromptExpireLeases(ctx); err != nil || n != 1 {
			t.Errorf("expire_leases = %d, %v; want the prompt failed once its lease ran out", n, err)
		}
	})
}

// promptStatus is a prompt's status and error.
func promptStatus(t *testing.T, tb *testBundle, id uuid.UUID) (status, errText string) {
	t.Helper()
	if err := tb.pool.QueryRow(context.Background(), `SELECT status, coalesce(error, '') FROM convo.prompts WHERE id = $1`, id).
		Scan(&status, &errText); err != nil {
		t.Fatal(err)
	}
	return status, errText
}
