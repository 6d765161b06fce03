package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/worker/internal/wdb"

	. "github.com/convo-dev/convo/worker"
)

// slowBatches delays every write_batch call: a committer far behind.
type slowBatches struct {
	SQLAPI
	delay time.Duration
}

func (s *slowBatches) BatchWrite(ctx context.Context, arg wdb.BatchWriteParams) ([]wdb.BatchWriteRow, error) {
	time.Sleep(s.delay)
	return s.SQLAPI.BatchWrite(ctx, arg)
}

// frozenAPI is a worker process cut off from PostgreSQL (killed, or behind
// a partition) from the moment a claim takes a prompt while freezeOnClaim
// is set: from then on every call that writes fails as a lost connection
// would, and nothing reaches the database.
// With beatsFail, only its heartbeats fail.
type frozenAPI struct {
	SQLAPI
	freezeOnClaim, frozen, beatsFail atomic.Bool
}

var errFrozen = errors.New("frozen: the connection is gone")

func (f *frozenAPI) PromptClaimMany(ctx context.Context, arg wdb.PromptClaimManyParams) ([]wdb.PromptClaimManyRow, error) {
	if f.frozen.Load() {
		return nil, errFrozen
	}
	rows, err := f.SQLAPI.PromptClaimMany(ctx, arg)
	if len(rows) > 0 && f.freezeOnClaim.Load() {
		f.frozen.Store(true)
	}
	return rows, err
}

func (f *frozenAPI) BatchWrite(ctx context.Context, arg wdb.BatchWriteParams) ([]wdb.BatchWriteRow, error) {
	if f.frozen.Load() {
		return nil, errFrozen
	}
	return f.SQLAPI.BatchWrite(ctx, arg)
}

func (f *frozenAPI) WorkerHeartbeat(ctx context.Context, arg wdb.WorkerHeartbeatParams) (bool, error) {
	if f.frozen.Load() || f.beatsFail.Load() {
		return false, errFrozen
	}
	return f.SQLAPI.WorkerHeartbeat(ctx, arg)
}

func (f *frozenAPI) PromptHeartbeat(ctx context.Context, arg wdb.PromptHeartbeatParams) (bool, error) {
	if f.frozen.Load() {
		return false, errFrozen
	}
	return f.SQLAPI.PromptHeartbeat(ctx, arg)
}

func (f *frozenAPI) PromptFail(ctx context.Context, arg wdb.PromptFailParams) error {
	if f.frozen.Load() {
		return errFrozen
	}
	return f.SQLAPI.PromptFail(ctx, arg)
}

func (f *frozenAPI) PromptRelease(ctx context.Context, arg wdb.PromptReleaseParams) (bool, error) {
	if f.frozen.Load() {
		return false, errFrozen
	}
	return f.SQLAPI.PromptRelease(ctx, arg)
}

// TestProcessLease covers the pool's process lease: one heartbeat per
// process keeps every reply it runs, whatever its batches do, and a
// process that stops heartbeating loses them all.
func TestProcessLease(t *testing.T) {
	t.Parallel()

	t.Run("SlowCommitterLosesNoReply", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		// Every batch takes 2.5 s, with a lease of 2 s: a lease that rode
		// in the batches would run out between any two of them. (With a
		// lease of 1 s, no heartbeat got through in time once, in a full
		// race-enabled run at load average 13; it passed alone.)
		_, res := tb.start(t, WithWrapAPI(Config{
			Models:  modelsWith(pacedModel(fastTokens(60), 20*time.Millisecond)),
			Workers: 6, LeaseSeconds: 2, PollInterval: 100 * time.Millisecond,
		}, func(inner SQLAPI) SQLAPI { return &slowBatches{SQLAPI: inner, delay: 2500 * time.Millisecond} }))
		// Leases are reaped all along (as the server's maintenance does).
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go func() {
			for ctx.Err() == nil {
				_, _ = tb.db.Exec(ctx, `SELECT convo.expire_leases()`)
				time.Sleep(100 * time.Millisecond)
			}
		}()
		var prompts []sent
		for i := range 4 {
			prompts = append(prompts, tb.send(t, uuid.Nil, "slowly "+strings.Repeat("x", i), `{}`))
		}
		for _, s := range prompts {
			if r := res.wait(t, s.promptID, 60*time.Second); r.Outcome != OutcomeCompleted {
				t.Errorf("prompt %s: %s (%v)", s.promptID, r.Outcome, r.Err)
			}
			if st, errText := tb.prompt(t, s.promptID); st != "completed" {
				t.Errorf("prompt %s is %s (%s)", s.promptID, st, errText)
			}
		}
	})

	t.Run("KilledWorkerLosesItsPrompts", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		const lease = 2 * time.Second
		frozen := &frozenAPI{}
		_, doomed := tb.start(t, WithWrapAPI(Config{
			Name: "doomed", Models: modelsWith(pacedModel(fastTokens(500), 20*time.Millisecond)),
			Workers: 3, LeaseSeconds: int(lease / time.Second), PollInterval: 100 * time.Millisecond, CallTimeout: time.Second,
		}, func(inner SQLAPI) SQLAPI { frozen.SQLAPI = inner; return frozen }))
		a, b := tb.send(t, uuid.Nil, "one", `{}`), tb.send(t, uuid.Nil, "two", `{}`)
		eventually(t, 20*time.Second, "both replies to stream", func() bool {
			for _, s := range []sent{a, b} {
				deltas := 0
				for _, e := range tb.events(t, s.conversationID) {
					if e.Kind == conversation.EventBlockDelta {
						deltas++
					}
				}
				if deltas == 0 {
					return false
				}
			}
			return true
		})
		// The third is claimed, and the process freezes before it starts.
		frozen.freezeOnClaim.Store(true)
		c := tb.send(t, uuid.Nil, "three", `{}`)
		eventually(t, 10*time.Second, "the third prompt to be claimed", func() bool { return frozen.frozen.Load() })
		killed := time.Now()
		var holder string
		if err := tb.db.QueryRow(context.Background(), `SELECT coalesce(worker, '') FROM convo.prompts WHERE id = $1`, c.promptID).
			Scan(&holder); err != nil || holder != "doomed" {
			t.Fatalf("third prompt held by %q (%v)", holder, err)
		}

		// The frozen process gives its replies up within about a lease
		// (its writes fail for that long, or its lease runs out).
		for _, s := range []sent{a, b} {
			r := doomed.wait(t, s.promptID, lease+5*time.Second)
			if r.Outcome == OutcomeCompleted {
				t.Errorf("frozen worker's reply %s completed", s.promptID)
			}
		}

		// A healthy worker reaps the lease: the running replies fail, the
		// claimed one goes back to the queue and the healthy one runs it.
		_, rescuer := tb.start(t, Config{Name: "rescuer", PollInterval: 100 * time.Millisecond})
		for _, s := range []sent{a, b} {
			var errText string
			eventually(t, 10*time.Second, "the frozen worker's reply to fail", func() bool {
				var st string
				st, errText = tb.prompt(t, s.promptID)
				return st == "failed"
			})
			if errText != "lease expired: worker doomed stopped heartbeating" {
				t.Errorf("prompt %s failed with %q", s.promptID, errText)
			}
		}
		if after := time.Since(killed); after < lease/2 || after > lease+5*time.Second {
			t.Errorf("failed %s after the freeze; the lease is %s", after, lease)
		}
		if r := rescuer.wait(t, c.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Errorf("the handed-back prompt: %s (%v)", r.Outcome, r.Err)
		}
		var attempts int
		if err := tb.db.QueryRow(context.Background(), `SELECT attempts FROM convo.prompts WHERE id = $1`, c.promptID).
			Scan(&attempts); err != nil || attempts != 2 {
			t.Errorf("handed-back prompt: %d claims (%v); want 2", attempts, err)
		}
	})

	t.Run("FailingHeartbeatsStopTheReplies", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		const lease = 2 * time.Second
		api := &frozenAPI{}
		_, res := tb.start(t, WithWrapAPI(Config{
			Name: "cut-off", Models: modelsWith(pacedModel(fastTokens(1000), 20*time.Millisecond)),
			Workers: 2, LeaseSeconds: int(lease / time.Second), PollInterval: 100 * time.Millisecond, CallTimeout: time.Second,
		}, func(inner SQLAPI) SQLAPI { api.SQLAPI = inner; return api }))
		a := tb.send(t, uuid.Nil, "long", `{}`)
		eventually(t, 20*time.Second, "the reply to stream", func() bool {
			for _, e := range tb.events(t, a.conversationID) {
				if e.Kind == conversation.EventBlockDelta {
					return true
				}
			}
			return false
		})
		// Its batches still go through; its heartbeats do not.
		api.beatsFail.Store(true)
		cut := time.Now()
		r := res.wait(t, a.promptID, lease+5*time.Second)
		if r.Outcome != OutcomeStopped || r.Err == nil || !strings.Contains(r.Err.Error(), "process lease ran out") {
			t.Errorf("reply: %s (%v); want stopped as the process lease ran out", r.Outcome, r.Err)
		}
		if after := time.Since(cut); after > lease+time.Second {
			t.Errorf("stopped %s after the heartbeats failed; the lease is %s", after, lease)
		}
		// PostgreSQL fails it once the lease ran out there too.
		var errText string
		eventually(t, 10*time.Second, "the reply to fail", func() bool {
			if _, err := tb.db.Exec(context.Background(), `SELECT convo.expire_leases()`); err != nil {
				t.Fatal(err)
			}
			var st string
			st, errText = tb.prompt(t, a.promptID)
			return st == "failed"
		})
		if errText != "lease expired: worker cut-off stopped heartbeating" {
			t.Errorf("failed with %q", errText)
		}
		// Heartbeats through again: a new lease, and new replies run.
		api.beatsFail.Store(false)
		b := tb.send(t, uuid.Nil, "again", `{}`)
		eventually(t, 10*time.Second, "a new reply to stream", func() bool {
			st, _ := tb.prompt(t, b.promptID)
			return st == "running"
		})
	})

	t.Run("PromptEndedElsewhereStopsItsIdleReply", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		// The model streams a word, then hangs: the reply writes nothing
		// that a refusal could answer.
		_, res := tb.start(t, Config{Models: modelsWith(pacedModel(fastTokens(2), time.Hour)),
			HeartbeatInterval: 100 * time.Millisecond})
		s := tb.send(t, uuid.Nil, "hang", `{}`)
		eventually(t, 20*time.Second, "the reply to stream", func() bool {
			for _, e := range tb.events(t, s.conversationID) {
				if e.Kind == conversation.EventBlockDelta {
					return true
				}
			}
			return false
		})
		if _, err := tb.db.Exec(context.Background(), `SELECT convo.fail_prompt($1, 'stopped by an operator')`, s.promptID); err != nil {
			t.Fatal(err)
		}
		ended := time.Now()
		r := res.wait(t, s.promptID, 5*time.Second)
		if r.Outcome != OutcomeStopped {
			t.Errorf("outcome %s (%v), want stopped", r.Outcome, r.Err)
		}
		t.Logf("stopped %s after the prompt failed", time.Since(ended))
	})

	t.Run("ListenerBackChecksThePromptsInFlight", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		// Heartbeats far apart: only the listener's reconnect can find,
		// within the test, a prompt that ended while no notification was
		// heard.
		_, res := tb.start(t, Config{Models: modelsWith(pacedModel(fastTokens(2), time.Hour)),
			LeaseSeconds: 120, HeartbeatInterval: time.Minute})
		s := tb.send(t, uuid.Nil, "hang", `{}`)
		eventually(t, 20*time.Second, "the reply to stream", func() bool {
			for _, e := range tb.events(t, s.conversationID) {
				if e.Kind == conversation.EventBlockDelta {
					return true
				}
			}
			return false
		})
		// Ended as a cancel would end it, but with no notification: as if
		// it was sent while the listener was away.
		if _, err := tb.db.Exec(context.Background(),
			`UPDATE convo.prompts SET status = 'cancelled', ended_at = now() WHERE id = $1`, s.promptID); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.db.Exec(context.Background(),
			`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			  WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'`); err != nil {
			t.Fatal(err)
		}
		ended := time.Now()
		r := res.wait(t, s.promptID, 20*time.Second)
		if r.Outcome != OutcomeCancelled {
			t.Errorf("outcome %s (%v), want cancelled", r.Outcome, r.Err)
		}
		t.Logf("stopped %s after the listener's connection was killed", time.Since(ended))
	})

	t.Run("OneHeartbeatPerProcessNotPerPrompt", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		api, wrap := newCountingAPI()
		const interval = 100 * time.Millisecond
		start := time.Now()
		p, res := tb.start(t, WithWrapAPI(Config{
			Models:  modelsWith(pacedModel(fastTokens(150), 10*time.Millisecond)),
			Workers: 8, LeaseSeconds: 3, HeartbeatInterval: interval,
		}, wrap))
		var prompts []sent
		for range 8 {
			prompts = append(prompts, tb.send(t, uuid.Nil, "in parallel", `{}`))
		}
		for _, s := range prompts {
			if r := res.wait(t, s.promptID, 30*time.Second); r.Outcome != OutcomeCompleted {
				t.Fatalf("prompt %s: %s (%v)", s.promptID, r.Outcome, r.Err)
			}
		}
		elapsed := time.Since(start)
		beats := api.count("WorkerHeartbeat")
		// One per interval for the process (a loaded machine may beat
		// less often), not one per prompt and interval.
		perInterval := float64(beats) / (float64(elapsed) / float64(interval))
		if perInterval > 1.5 || beats < 3 {
			t.Errorf("%d process heartbeats in %s with 8 replies: %.2f per interval, want about 1", beats, elapsed, perInterval)
		}
		if n := api.count("heartbeat") + api.count("PromptHeartbeat"); n != 0 {
			t.Errorf("%d per-prompt heartbeats; want none", n)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(p)
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var ok float64
		for _, f := range families {
			if f.GetName() != "convo_worker_heartbeats_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "ok" {
					ok = m.GetCounter().GetValue()
				}
			}
		}
		// The count is taken when a call starts and the metric when it
		// returns; heartbeats are serial, so at most one is in between.
		if after := api.count("WorkerHeartbeat"); ok < float64(beats-1) || ok > float64(after) {
			t.Errorf("convo_worker_heartbeats_total{result=ok} = %v; %d to %d calls were started", ok, beats, after)
		}
		t.Logf("%d process heartbeats in %s for 8 replies (%.2f per interval)", beats, elapsed, perInterval)
	})
}
