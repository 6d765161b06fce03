package worker

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/internal/backoff"
	"github.com/convo-dev/convo/internal/firstdelta"
	"github.com/convo-dev/convo/pglisten"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/worker/internal/wdb"
)

// Pool runs up to Config.Workers prompts at once in one process. One
// claim loop takes prompts (several per call), Config.BatchLanes
// committers write every reply's output in shared transactions, one
// heartbeat keeps the process's lease (which keeps every prompt it holds
// alive; heartbeat.go), and one LISTEN connection hears new prompts and
// cancellations; the number of prompts in flight does not change how many
// connections it uses. Start one with Start; stop it with
// Stop.
type Pool struct {
	cfg        Config
	api        sqlAPI
	committers []*committer // one per lane
	// urgent is one more lane (number BatchLanes), for starts and first
	// texts only: they never wait behind a batch of other replies' text.
	urgent *committer
	// cancel stops everything: the prompts in flight and the listener.
	cancel context.CancelCauseFunc
	// stopClaims stops the claim loop only (Drain).
	stopClaims context.CancelFunc
	// stopCommitter stops the committers, once no prompt runs (shutdown).
	stopCommitter context.CancelFunc
	stopOnce      sync.Once
	// workers tracks the claim loop and the prompts it started; wg
	// tracks them, the committer and the listener.
	workers sync.WaitGroup
	wg      sync.WaitGroup
	// wake holds a token when a "queued" notification, or a prompt's
	// end, has not been acted on.
	wake chan struct{}

	mu      sync.Mutex
	running map[uuid.UUID]context.CancelCauseFunc
	// starting counts prompts claimed whose goroutine has not registered.
	starting int
	// The process lease (heartbeat.go): live until leaseUntil by this
	// process's clock, unless leaseLost; leaseEpoch grows each time it is
	// lost, and a claim made under an older epoch does not run.
	leaseUntil time.Time
	leaseLost  bool
	leaseEpoch int
	// checking: a check of the prompts in flight is under way.
	checking atomic.Bool
	// recheck asks the heartbeat loop to check the prompts in flight now
	// (the listener listened again: a cancel may have been missed).
	recheck chan struct{}

	// claimPerPrompt is the recent time of a claim divided by its
	// prompts, in nanoseconds; 0: none measured yet (claimCap).
	claimPerPrompt atomic.Int64

	metrics poolMetrics
	// otel traces and measures prompts (Config.Telemetry); nil: off.
	otel *poolTelemetry
}

// Run runs cfg.Workers workers on db until ctx ends, then stops them as
// Stop does and returns. It fails at once for an invalid Config or when
// the database cannot be reached.
func Run(ctx context.Context, db *pgxpool.Pool, cfg Config) error {
	p, err := Start(ctx, db, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return p.Stop(stopCtx)
}

// Start starts cfg.Workers workers on db (whose database must be
// migrated) and returns. They run until Stop is called or ctx ends, and
// look for prompts as soon as their process lease is taken (the first
// heartbeat) and after every (re)connect of the listener, so a prompt
// queued before they listen is not missed. The pool uses a few of db's
// connections whatever cfg.Workers is: each committer holds one while it
// writes a batch, the heartbeat one for a moment every
// HeartbeatInterval, the claim loop one while it claims, and each prompt
// one for a moment when it starts (to read its conversation) and when it
// ends badly; 5 plus BatchLanes (the lanes and the urgent lane) is plenty, and a busy db makes them wait,
// not fail. The listener uses one more, outside db, unless cfg.Listener is
// shared. Start fails for an invalid Config.
func Start(ctx context.Context, db *pgxpool.Pool, cfg Config) (*Pool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("worker config: %w", err)
	}
	if cfg.Workers > 0 && cfg.Listener == nil && postgres.TransactionPooled(db.Config().ConnConfig) {
		// Through a transaction pooler the LISTEN would hold on a server
		// connection the listener does not keep: the workers would hear
		// nothing and only poll.
		return nil, errors.New("worker: the database pool goes through a transaction pooler (CONVO_DB_POOL_MODE=transaction), " +
			"where LISTEN does not hold: set CONVO_DIRECT_DATABASE_URL to a direct (or session-pooled) URL for the listener (Config.Listener)")
	}
	p := &Pool{
		cfg: cfg, api: wdb.New(db),
		wake:    make(chan struct{}, 1),
		recheck: make(chan struct{}, 1),
		running: map[uuid.UUID]context.CancelCauseFunc{},
		metrics: newPoolMetrics(),
		otel:    newPoolTelemetry(cfg.Telemetry),
	}
	if cfg.wrapAPI != nil {
		p.api = cfg.wrapAPI(p.api)
	}
	for lane := range cfg.BatchLanes {
		p.committers = append(p.committers, newCommitter(p.api, cfg.Name, lane, false, &p.cfg, &p.metrics))
	}
	p.urgent = newCommitter(p.api, cfg.Name, cfg.BatchLanes, true, &p.cfg, &p.metrics)
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	claimCtx, stopClaims := context.WithCancel(runCtx)
	commitCtx, stopCommitter := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel, p.stopClaims, p.stopCommitter = cancel, stopClaims, stopCommitter
	if cfg.Workers == 0 {
		cancel(errShutdown)
		stopCommitter()
		return p, nil
	}
	for _, c := range append([]*committer{p.urgent}, p.committers...) {
		p.wg.Go(func() { c.run(commitCtx) })
	}
	// The lease outlives the prompts in flight (a drain lets them finish),
	// as the committers do.
	p.wg.Go(func() { p.heartbeatLoop(commitCtx) })

	l := cfg.Listener
	if l == nil {
		l = pglisten.New(pglisten.Options{ConnConfig: db.Config().ConnConfig, Logger: cfg.Logger, PingInterval: 30 * time.Second})
		p.wg.Go(func() { l.Run(runCtx) })
	}
	// A notification only wakes the claim loop: it also polls, and every
	// batch checks that each prompt is still ours. After a reconnect, what
	// was notified meanwhile is looked for: the claim loop claims, and the
	// prompts in flight are checked for cancels.
	l.Listen(PromptsChannel, pglisten.Handler{Notify: p.notified, Ready: func() {
		p.wakeUp()
		select {
		case p.recheck <- struct{}{}:
		default:
		}
	}})
	p.workers.Add(1)
	p.wg.Go(func() {
		defer p.workers.Done()
		p.claimLoop(claimCtx, runCtx)
	})
	// A parent context that ends stops the pool too.
	context.AfterFunc(ctx, p.shutdown)
	cfg.Logger.Info("workers started", "workers", cfg.Workers, "name", cfg.Name,
		"models", cfg.Models.Names(), "default_model", cfg.Models.Default())
	return p, nil
}

// Stop stops claiming, stops the models of the prompts in flight and fails
// those prompts ("worker … stopped …"), releases prompts claimed but not
// yet started to the queue, and waits for every worker to return, or for
// ctx to end (then it returns ctx's error). It is safe to call more than
// once.
func (p *Pool) Stop(ctx context.Context) error {
	p.shutdown()
	if !waitCtx(ctx, &p.wg) {
		return fmt.Errorf("stop workers: %w", ctx.Err())
	}
	return nil
}

// shutdown stops the prompts in flight and, once they have settled, the
// committers, which write what they queued until then. It is safe to call
// more than once.
func (p *Pool) shutdown() {
	p.cancel(errShutdown)
	p.stopOnce.Do(func() {
		go func() {
			p.workers.Wait()
			p.stopCommitter()
		}()
	})
}

// Drain stops claiming prompts at once and lets the prompts in flight
// finish until ctx ends; then it stops the rest as Stop does, allowing
// them stopTimeout to be failed. A server that is shutting down drains
// its workers, so that replies in progress complete.
func (p *Pool) Drain(ctx context.Context, stopTimeout time.Duration) error {
	p.stopClaims()
	if !waitCtx(ctx, &p.workers) {
		p.cfg.Logger.Warn("workers drained: stopping the prompts still in flight")
	} else if p.cfg.Workers > 0 {
		// A pool of no workers had nothing to drain, and says nothing.
		p.cfg.Logger.Info("workers drained: every prompt in flight finished")
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	return p.Stop(stopCtx)
}

// waitCtx waits for wg, or for ctx to end; it reports whether wg finished.
func waitCtx(ctx context.Context, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// PromptsChannel is the channel the SQL worker API notifies with
// "queued:<prompt id>", "queued:*" (prompts were queued: convo.send_messages
// sends one for all of its transaction's) and "cancelled:<prompt id>".
const PromptsChannel = "convo_prompts"

// notified handles a notification of PromptsChannel.
func (p *Pool) notified(payload string) {
	kind, id, _ := strings.Cut(payload, ":")
	switch kind {
	case "queued": // whatever follows: an id, or "*"
		p.wakeUp()
	case "cancelled":
		if promptID, err := uuid.Parse(id); err == nil {
			p.cancelPrompt(promptID)
		}
	}
}

// Wake makes the claim loop look for prompts now, as a "queued"
// notification does: a server whose SendMessage queued prompts calls it,
// so its own workers claim them without waiting for the notification's
// round trip. It never blocks, and does nothing once the pool stopped.
func (p *Pool) Wake() { p.wakeUp() }

// wakeUp makes the claim loop look for prompts.
func (p *Pool) wakeUp() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// cancelPrompt stops the worker running promptID in this process, if any.
func (p *Pool) cancelPrompt(promptID uuid.UUID) {
	p.mu.Lock()
	cancel := p.running[promptID]
	p.mu.Unlock()
	if cancel != nil {
		cancel(errCancelled)
	}
}

// The prompts one claim takes: what it claims in about claimTarget, by
// the time recent claims took per prompt (claimMin to claimBatch;
// claimFirst until one was measured). A claim's prompts start only when
// it returns, and under a burst a claim costs the database about a
// millisecond a prompt (several on a loaded machine): one claim of 50
// would start none of them for hundreds of milliseconds, where claims of
// a few start the first at once and the rest as they are claimed, as the
// sender's groups answer a burst's sends a few at a time.
const (
	claimBatch  = 100
	claimMin    = 4
	claimFirst  = 8
	claimTarget = 25 * time.Millisecond
)

// claimCap is how many prompts the next claim takes at most.
func (p *Pool) claimCap() int {
	per := time.Duration(p.claimPerPrompt.Load())
	if per <= 0 {
		return claimFirst
	}
	return int(min(max(claimTarget/per, claimMin), claimBatch))
}

// claimMeasured folds a claim of n prompts that took took into
// claimPerPrompt (an average weighing the last claim a quarter).
func (p *Pool) claimMeasured(n int, took time.Duration) {
	per := int64(took) / int64(n)
	for {
		old := p.claimPerPrompt.Load()
		next := per
		if old > 0 {
			next = old + (per-old)/4
		}
		if p.claimPerPrompt.CompareAndSwap(old, next) {
			return
		}
	}
}

// claimLoop claims prompts while fewer than cfg.Workers run, until
// claimCtx ends, and runs each in its own goroutine until it settles or
// runCtx ends. With the queue empty, every slot taken, or only reserved
// slots free and nobody waiting who holds no prompt, it waits for a
// notification, a prompt's end or the poll interval. After a failed claim
// (PostgreSQL restarting, a dead pooled connection) it tries again after
// a short backoff instead: the notification that woke it is spent, and
// those sent while the listener reconnects are lost.
func (p *Pool) claimLoop(claimCtx, runCtx context.Context) {
	retry := backoff.New(claimRetry, max(claimRetry, min(maxClaimRetry, p.cfg.PollInterval)))
	for claimCtx.Err() == nil {
		p.mu.Lock()
		free := p.cfg.Workers - len(p.running) - p.starting
		p.mu.Unlock()
		// No claim without a live process lease: its prompts would have
		// nothing to keep them. The heartbeat wakes the loop when it
		// takes the lease.
		epoch, live := p.leaseLive()
		failed := false
		if free > 0 && live {
			// A claim is not cancelled when claiming stops (Drain): its
			// prompts would stay held until their lease ran out.
			// The reserve is the last ReservedSlots of the free slots, so
			// a claim of fewer than free takes its share of them only.
			n := min(free, p.claimCap())
			reserved := max(0, min(p.cfg.ReservedSlots, free)-(free-n))
			began := time.Now()
			claimed, err := p.claim(context.WithoutCancel(claimCtx), n, reserved)
			if err == nil && len(claimed) > 0 {
				p.claimMeasured(len(claimed), time.Since(began))
			}
			if err != nil && claimCtx.Err() == nil {
				p.cfg.Logger.Warn("claim prompts", "err", err)
			}
			if len(claimed) > 0 && !p.leaseHeld(epoch) {
				// The lease ran out during the claim: these prompts are
				// let go (or will be); hand them back now.
				p.releaseAll(claimed)
				continue
			}
			if firstdelta.On() {
				now := time.Now()
				for _, c := range claimed {
					firstdelta.Mark(c.PromptID, firstdelta.Claimed, now)
				}
			}
			for _, c := range claimed {
				p.mu.Lock()
				p.starting++
				p.mu.Unlock()
				p.workers.Add(1)
				go func() {
					defer p.workers.Done()
					p.handle(runCtx, c, epoch)
				}()
			}
			if err == nil && len(claimed) > 0 {
				retry.Reset()
				continue // perhaps more are queued
			}
			failed = err != nil
		}
		// Jitter, so the pools of many processes do not poll in step.
		poll := p.cfg.PollInterval/2 + rand.N(p.cfg.PollInterval)
		if failed {
			poll = retry.Next()
		} else {
			retry.Reset()
		}
		select {
		case <-claimCtx.Done():
		case <-p.wake:
		case <-time.After(poll):
		}
	}
}

// The wait before claiming again after a failed claim: it doubles from
// claimRetry up to maxClaimRetry (or the poll interval, if shorter) while
// claims fail.
const (
	claimRetry    = 100 * time.Millisecond
	maxClaimRetry = 5 * time.Second
)

// claim claims up to n claimable prompts in the fair order of
// convo.claim_prompts, the last reserved of them only for users who hold
// no prompt.
func (p *Pool) claim(ctx context.Context, n, reserved int) ([]wdb.PromptClaimManyRow, error) {
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	defer cancel()
	arg := wdb.PromptClaimManyParams{
		Worker: p.cfg.Name, LeaseSeconds: int32(p.cfg.LeaseSeconds), MaxPrompts: int32(n), Reserved: int32(reserved),
	}
	var rows []wdb.PromptClaimManyRow
	var err error
	if p.otel == nil {
		rows, err = p.api.PromptClaimMany(cctx, arg)
	} else {
		// The trace context and the queue wait feed only telemetry.
		var traced []wdb.PromptClaimManyTracedRow
		traced, err = p.api.PromptClaimManyTraced(cctx, wdb.PromptClaimManyTracedParams(arg))
		for _, r := range traced {
			rows = append(rows, wdb.PromptClaimManyRow(r))
		}
	}
	if err != nil {
		return nil, err
	}
	p.metrics.claims.Add(float64(len(rows)))
	return rows, nil
}

// committerFor returns the lane of a conversation's replies: always the
// same, so that two replies of one conversation (an A/B comparison) are
// written in one order.
func (p *Pool) committerFor(conversationID uuid.UUID) *committer {
	h := fnv.New32a()
	h.Write(conversationID[:])
	return p.committers[h.Sum32()%uint32(len(p.committers))]
}

// register routes cancellations of promptID to cancel. A prompt claimed
// under a process lease since lost (epoch) stops at once.
func (p *Pool) register(promptID uuid.UUID, cancel context.CancelCauseFunc, epoch int) {
	p.mu.Lock()
	p.starting--
	p.running[promptID] = cancel
	if epoch != p.leaseEpoch {
		cancel(errLeaseLost)
	}
	p.mu.Unlock()
}

// releaseAll hands claimed prompts back to the queue.
func (p *Pool) releaseAll(claimed []wdb.PromptClaimManyRow) {
	for _, c := range claimed {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.CallTimeout)
		_, err := p.api.PromptRelease(ctx, wdb.PromptReleaseParams{PromptID: c.PromptID, Worker: p.cfg.Name})
		cancel()
		if err != nil {
			p.cfg.Logger.Warn("release a prompt claimed as the process lease ran out; its lease hands it back", "prompt_id", c.PromptID, "err", err)
		}
	}
}

// unregister forgets promptID, and wakes the claim loop: a slot is free.
func (p *Pool) unregister(promptID uuid.UUID) {
	p.mu.Lock()
	delete(p.running, promptID)
	p.mu.Unlock()
	p.wakeUp()
}
