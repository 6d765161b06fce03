package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/internal/backoff"
	"github.com/convo-dev/convo/worker/internal/wdb"
)

// The process lease (convo.worker_heartbeat, docs/worker-api.md, "Two
// leases"): one heartbeat per Pool, every HeartbeatInterval, on a
// connection of its own use, keeps every prompt the pool claimed alive,
// however many run and however long the committers' batches wait. No
// heartbeat rides in a batch.
//
// The pool claims only while its lease is live by its own clock: until
// the send time of the last heartbeat that extended it, plus the lease
// (PostgreSQL's end of the lease is later: it counts from when the call
// arrived). When that time passes with no heartbeat through (the
// database unreachable, the calls timing out), every reply in flight
// stops, writing nothing more, as when a prompt is no longer the
// worker's: PostgreSQL fails them (or hands them back to the queue) once
// the lease ran out there too. The next heartbeat that gets through then
// starts a new lease and lets go, at once, of whatever the old one held
// (starting), so that no prompt this process dropped stays held by it.
// A heartbeat that answers false (the lease had run out in PostgreSQL)
// stops every reply in flight too.
//
// After each heartbeat through, one read asks which of the prompts in
// flight are no longer the pool's (cancelled with the notification
// missed, failed or handed back by someone else): those stop. A
// per-prompt heartbeat told a worker the same; this is one query per
// interval for the whole process, and a slow one never holds up the next
// heartbeat.

// errLeaseLost is the cause of the replies stopped because the process
// lease ran out.
var errLeaseLost = fmt.Errorf("%w: the worker's process lease ran out (no heartbeat got through in time)", errLost)

// heartbeatRetry is the first wait before trying a failed heartbeat
// again; it doubles up to the heartbeat interval.
const heartbeatRetry = 100 * time.Millisecond

// heartbeatLoop keeps the pool's process lease until ctx ends: the first
// call (starting) takes it, before any claim; the claim loop waits for it.
func (p *Pool) heartbeatLoop(ctx context.Context) {
	lease := time.Duration(p.cfg.LeaseSeconds) * time.Second
	retry := backoff.New(heartbeatRetry, max(heartbeatRetry, p.cfg.HeartbeatInterval))
	watchdog := time.AfterFunc(time.Hour, p.leaseLapsed)
	watchdog.Stop()
	defer watchdog.Stop()
	starting := true
	for ctx.Err() == nil {
		sent := time.Now()
		live, err := p.beat(ctx, starting)
		wait := p.cfg.HeartbeatInterval
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			p.metrics.heartbeats.WithLabelValues("error").Inc()
			wait = retry.Next()
			p.cfg.Logger.Warn("worker heartbeat failed", "err", err, "retry_in", wait)
		case !live && !starting:
			p.metrics.heartbeats.WithLabelValues("expired").Inc()
			p.cfg.Logger.Warn("the worker's process lease had run out: its replies in flight are stopped")
			retry.Reset()
			p.leaseTaken(sent.Add(lease), true, watchdog)
		default:
			p.metrics.heartbeats.WithLabelValues("ok").Inc()
			retry.Reset()
			p.leaseTaken(sent.Add(lease), false, watchdog)
			if !starting {
				p.checkInFlight(ctx)
			}
		}
		if err == nil {
			starting = false
		}
		timer := time.NewTimer(wait)
	waiting:
		for {
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-p.recheck:
				p.checkInFlight(ctx)
			case <-timer.C:
				break waiting
			}
		}
		// Once the lease lapsed here, the next heartbeat lets go of what
		// the old one held: this process stopped those replies.
		p.mu.Lock()
		if p.leaseLost {
			starting = true
		}
		p.mu.Unlock()
	}
}

// beat calls convo.worker_heartbeat once, for at most the lease (a later
// answer is of no use: the lease ran out meanwhile).
func (p *Pool) beat(ctx context.Context, starting bool) (bool, error) {
	lease := time.Duration(p.cfg.LeaseSeconds) * time.Second
	cctx, cancel := context.WithTimeout(ctx, min(p.cfg.CallTimeout, lease))
	defer cancel()
	live, err := p.api.WorkerHeartbeat(cctx, wdb.WorkerHeartbeatParams{
		Worker: p.cfg.Name, LeaseSeconds: int32(p.cfg.LeaseSeconds), Starting: starting,
	})
	if err != nil {
		return false, fmt.Errorf("worker_heartbeat: %w", err)
	}
	return live, nil
}

// leaseTaken records a heartbeat that got through: the lease lasts until
// until by this process's clock. With lost, the lease before it had run
// out: every reply in flight stops.
func (p *Pool) leaseTaken(until time.Time, lost bool, watchdog *time.Timer) {
	p.mu.Lock()
	if lost {
		p.loseLeaseLocked()
	}
	p.leaseUntil = until
	p.leaseLost = false
	p.mu.Unlock()
	watchdog.Reset(time.Until(until))
	p.wakeUp() // the claim loop may wait for the lease
}

// leaseLapsed runs when the lease's end passed: unless a heartbeat
// extended it meanwhile, every reply in flight stops.
func (p *Pool) leaseLapsed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Now().Before(p.leaseUntil) || p.leaseLost {
		return
	}
	p.leaseLost = true
	p.loseLeaseLocked()
	p.cfg.Logger.Warn("the worker's process lease ran out: no heartbeat got through; its replies in flight are stopped",
		"lease_seconds", p.cfg.LeaseSeconds)
}

// loseLeaseLocked stops every reply in flight, and those of claims under
// way (a new epoch). The caller holds p.mu.
func (p *Pool) loseLeaseLocked() {
	p.leaseEpoch++
	for _, cancel := range p.running {
		cancel(errLeaseLost)
	}
}

// leaseLive reports whether the process lease is live by this process's
// clock, and its epoch.
func (p *Pool) leaseLive() (epoch int, live bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaseEpoch, !p.leaseLost && time.Now().Before(p.leaseUntil)
}

// leaseHeld reports whether the lease of epoch is still live: a claim made
// under it may run its prompts.
func (p *Pool) leaseHeld(epoch int) bool {
	e, live := p.leaseLive()
	return live && e == epoch
}

// checkInFlight runs stopGone in the background unless a check is under
// way: after each heartbeat, and when the listener listened again (a
// cancel notified while it was away was missed). Only the heartbeat loop
// calls it, so that its goroutines are the pool's while it runs.
func (p *Pool) checkInFlight(ctx context.Context) {
	if !p.checking.CompareAndSwap(false, true) {
		return
	}
	p.wg.Go(func() {
		defer p.checking.Store(false)
		p.stopGone(ctx)
	})
}

// stopGone stops the replies in flight whose prompts are no longer the
// pool's: cancelled ones as a cancellation, the others as lost.
func (p *Pool) stopGone(ctx context.Context) {
	p.mu.Lock()
	ids := make([]uuid.UUID, 0, len(p.running))
	for id := range p.running {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	defer cancel()
	gone, err := p.api.WorkerPromptsGone(cctx, wdb.WorkerPromptsGoneParams{Worker: p.cfg.Name, PromptIds: ids})
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Logger.Warn("check the prompts in flight", "err", err)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range gone {
		stop := p.running[g.PromptID]
		switch {
		case stop == nil, g.Status == "completed":
			// Ended, or its run is completing it.
		case g.Status == "cancelled":
			stop(errCancelled)
		default:
			stop(errLost)
		}
	}
}
