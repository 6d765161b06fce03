package worker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/pglisten"
	"github.com/convo-dev/convo/postgres/dbq"
)

// Pool is a set of workers in one process, sharing one LISTEN connection
// and a pgxpool. Start one with Start; stop it with Stop.
type Pool struct {
	cfg Config
	api sqlAPI
	// cancel stops everything: the prompts in flight and the listener.
	cancel context.CancelCauseFunc
	// stopClaims stops the workers' claim loops only (Drain).
	stopClaims context.CancelFunc
	// workers tracks the claim loops (and the prompts they run); wg
	// tracks them and the listener.
	workers sync.WaitGroup
	wg      sync.WaitGroup
	// wake holds one token per "queued" notification not yet acted on.
	wake chan struct{}

	mu      sync.Mutex
	running map[uuid.UUID]context.CancelCauseFunc

	metrics poolMetrics
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
// look for prompts at once and after every (re)connect of the listener,
// so a prompt queued before they listen is not missed. db should allow about two connections per
// worker (a write and a heartbeat); the listener uses one more, outside
// the pool, unless cfg.Listener is shared. Start fails for an invalid
// Config.
func Start(ctx context.Context, db *pgxpool.Pool, cfg Config) (*Pool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("worker config: %w", err)
	}
	p := &Pool{
		cfg: cfg, api: dbq.New(db),
		wake:    make(chan struct{}, max(cfg.Workers, 1)),
		running: map[uuid.UUID]context.CancelCauseFunc{},
		metrics: newPoolMetrics(),
	}
	if cfg.wrapAPI != nil {
		p.api = cfg.wrapAPI(p.api)
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	claimCtx, stopClaims := context.WithCancel(runCtx)
	p.cancel, p.stopClaims = cancel, stopClaims
	if cfg.Workers == 0 {
		cancel(errShutdown)
		return p, nil
	}

	l := cfg.Listener
	if l == nil {
		l = pglisten.New(pglisten.Options{ConnConfig: db.Config().ConnConfig, Logger: cfg.Logger, PingInterval: 30 * time.Second})
		p.wg.Go(func() { l.Run(runCtx) })
	}
	// A notification only wakes a worker: the workers also poll, and a
	// heartbeat notices a cancellation sent while the connection was down.
	l.Listen(PromptsChannel, pglisten.Handler{Notify: p.notified, Ready: p.wakeAll})
	for i := range cfg.Workers {
		name := fmt.Sprintf("%s/%d", cfg.Name, i)
		p.workers.Add(1)
		p.wg.Go(func() {
			defer p.workers.Done()
			p.work(claimCtx, runCtx, name)
		})
	}
	// A parent context that ends stops the pool too.
	context.AfterFunc(ctx, func() { cancel(errShutdown) })
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
	p.cancel(errShutdown)
	if !waitCtx(ctx, &p.wg) {
		return fmt.Errorf("stop workers: %w", ctx.Err())
	}
	return nil
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
// "queued:<prompt id>" and "cancelled:<prompt id>".
const PromptsChannel = "convo_prompts"

// notified handles a notification of PromptsChannel.
func (p *Pool) notified(payload string) {
	kind, id, _ := strings.Cut(payload, ":")
	switch kind {
	case "queued":
		p.wakeOne()
	case "cancelled":
		if promptID, err := uuid.Parse(id); err == nil {
			p.cancelPrompt(promptID)
		}
	}
}

func (p *Pool) wakeOne() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *Pool) wakeAll() {
	for range cap(p.wake) {
		p.wakeOne()
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

// work is one worker: it claims prompts until claimCtx ends and runs each
// until it settles or runCtx ends, and waits for a notification or the
// poll interval when the queue is empty.
func (p *Pool) work(claimCtx, runCtx context.Context, name string) {
	log := p.cfg.Logger.With("worker", name)
	for claimCtx.Err() == nil {
		// Run prompts until the queue is empty.
		for claimCtx.Err() == nil {
			claimed, err := p.claim(claimCtx, name)
			if err != nil {
				if claimCtx.Err() == nil {
					log.Warn("claim a prompt", "err", err)
				}
				break
			}
			if claimed == nil {
				break
			}
			p.handle(runCtx, name, *claimed)
		}
		// Jitter, so the workers of many processes do not poll in step.
		poll := p.cfg.PollInterval/2 + rand.N(p.cfg.PollInterval)
		select {
		case <-claimCtx.Done():
		case <-p.wake:
		case <-time.After(poll):
		}
	}
}

// claim claims the oldest claimable prompt, or returns nil.
func (p *Pool) claim(ctx context.Context, name string) (*dbq.PromptClaimRow, error) {
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	defer cancel()
	rows, err := p.api.PromptClaim(cctx, dbq.PromptClaimParams{Worker: name, LeaseSeconds: int32(p.cfg.LeaseSeconds)})
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	p.metrics.claims.Inc()
	return &rows[0], nil
}

// register routes cancellations of promptID to cancel.
func (p *Pool) register(promptID uuid.UUID, cancel context.CancelCauseFunc) {
	p.mu.Lock()
	p.running[promptID] = cancel
	p.mu.Unlock()
}

func (p *Pool) unregister(promptID uuid.UUID) {
	p.mu.Lock()
	delete(p.running, promptID)
	p.mu.Unlock()
}
