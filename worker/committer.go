package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/worker/internal/wdb"
)

// committer writes the output of the replies a Pool gives it (a Pool has
// Config.BatchLanes of them, each conversation's replies always in the
// same one), all replies together: one call of convo.write_batch (one
// transaction, one notification per conversation) per tick, on one
// connection at a time, whatever the number of replies. It is the group
// commit of the worker runtime.
//
// Pacing: a batch starts as soon as something is waiting if the previous
// one ended at least BatchInterval ago and the committer has been busy at
// most half the time since; otherwise the ops wait, and the next batch
// carries more of them (more text per delta). A reply's first text, a
// start, an end and anything a reply waits for (writer.sync) skip the
// interval: they go in the next batch at once.
//
// The urgent lane: a Pool has one more committer (lane BatchLanes) that
// takes only the writers with a start or a first text queued (hot), so
// that those never wait behind a batch of other replies' text in flight
// on their lane; and any batch that carries a hot writer's ops is cut at
// urgentBudget, so that a burst's starts commit a few at a time, the
// first at once, rather than all with the last. A writer's ops are in at
// most one batch at a time (writer.inFlight): the lanes take turns, and
// its ops are applied in order.
//
// Each writer's ops are applied in the order it queued them. A batch is
// retried as it was (same number, same ops) when the connection fails or
// PostgreSQL asks for a retry; write_batch applies a batch once whatever
// the number of tries. A reply whose ops write_batch refuses (cancelled,
// deleted, no longer this worker's, an illegal write) fails alone.
type committer struct {
	api    sqlAPI
	worker string
	lane   int32 // write_batch's lane: the pool's committers write at once
	// hot: the urgent lane, which takes only the writers with a start or
	// a first text queued (see urgentBudget).
	hot bool
	cfg *Config
	log *slog.Logger
	m   *poolMetrics

	mu      sync.Mutex
	writers map[*writer]struct{} // every open writer
	pending bool                 // some writer queued ops since the last flush began
	urgent  bool
	stopped bool
	kick    chan struct{}

	// batch is the number of the last batch; it starts from the clock,
	// and from the last batch applied for this worker and lane when that
	// is further (numbered), so that it grows across restarts of a worker
	// keeping its name.
	batch    int64
	numbered bool
}

// newCommitter returns the committer of lane; hot: the urgent lane.
func newCommitter(api sqlAPI, worker string, lane int, hot bool, cfg *Config, m *poolMetrics) *committer {
	return &committer{
		api: api, worker: worker, lane: int32(lane), hot: hot, cfg: cfg, log: cfg.Logger, m: m,
		writers: map[*writer]struct{}{},
		kick:    make(chan struct{}, 1),
		batch:   time.Now().UnixMicro(),
	}
}

// register adds w; it fails once the committer has stopped.
func (c *committer) register(w *writer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errShutdown
	}
	c.writers[w] = struct{}{}
	return nil
}

func (c *committer) unregister(w *writer) {
	c.mu.Lock()
	delete(c.writers, w)
	c.mu.Unlock()
}

// queued tells the committer that a writer has ops to write; urgent ones
// skip the interval.
func (c *committer) queued(urgent bool) {
	c.mu.Lock()
	c.pending = true
	c.urgent = c.urgent || urgent
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run writes batches until ctx ends; then it settles every writer's
// queued ops with errShutdown. A batch in flight is finished first.
func (c *committer) run(ctx context.Context) {
	defer c.shutdown()
	pace := time.NewTimer(time.Hour)
	defer pace.Stop()
	var lastEnd time.Time
	var lastTook time.Duration
	for {
		c.mu.Lock()
		pending, urgent := c.pending, c.urgent
		c.mu.Unlock()
		if !pending {
			select {
			case <-ctx.Done():
				return
			case <-c.kick:
			}
			continue
		}
		// Busy at most half the time: a batch that took long is followed
		// by a pause as long, in which ops gather.
		gap := max(c.cfg.BatchInterval, lastTook)
		if c.cfg.BatchInterval < 0 {
			gap = 0
		}
		if wait := time.Until(lastEnd.Add(gap)); !urgent && wait > 0 {
			pace.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-c.kick:
				continue // perhaps urgent now
			case <-pace.C:
			}
		}
		start := time.Now()
		c.flush(ctx)
		lastEnd = time.Now()
		lastTook = lastEnd.Sub(start)
	}
}

// batchBudget bounds the cost (see op.cost) of one batch: about 1,500
// appends' worth, some 50 ms of PostgreSQL's time on two cores. A burst
// (a thousand replies starting at once) is written in several batches,
// so that no event waits long in its batch for the commit.
const batchBudget = 1500

// urgentBudget bounds a batch that carries starts or first texts, on any
// lane: about 8 starts. Under a burst of claims, a batch of a hundred
// starts commits the first with the last; batches of a few commit them
// a few at a time, the first at once, at the price of a few more commits.
const urgentBudget = 100

// batchPart is what one writer put in a batch: its ops from first on.
type batchPart struct {
	w     *writer
	first int
	ops   []*op
}

// flush writes one batch: every writer's queued ops. (No heartbeat rides
// in it: the pool's process lease keeps every prompt alive, on its own
// schedule and connection, however long batches wait; see heartbeat.go.)
func (c *committer) flush(ctx context.Context) {
	c.mu.Lock()
	c.urgent = false
	c.pending = false
	writers := make([]*writer, 0, len(c.writers))
	for w := range c.writers {
		writers = append(writers, w)
	}
	c.mu.Unlock()
	// Oldest waiting first: when the budget cuts a batch short, the
	// replies left out are the ones that queued last.
	since := make(map[*writer]time.Time, len(writers))
	for _, w := range writers {
		since[w] = w.waitingSince()
	}
	slices.SortFunc(writers, func(a, b *writer) int { return since[a].Compare(since[b]) })

	var parts []batchPart
	var wire []wireOp
	cost, budget := 0, batchBudget
	for i, w := range writers {
		if cost >= budget {
			// The rest go in the next batch, which starts at once: a
			// batch that takes long holds its first events back as long.
			if slices.ContainsFunc(writers[i:], func(w *writer) bool { return w.hasQueued(c.hot) }) {
				c.queued(true)
			}
			break
		}
		ops, hot := w.take(c.hot)
		if len(ops) == 0 {
			continue
		}
		if hot {
			budget = urgentBudget
		}
		parts = append(parts, batchPart{w: w, first: len(wire), ops: ops})
		for _, o := range ops {
			wire = append(wire, o.wire(w.promptID))
			cost += o.cost()
		}
	}
	if len(wire) == 0 {
		return
	}
	refused, err := c.writeOps(ctx, wire)
	var pgErr *pgconn.PgError
	if err != nil && len(parts) > 1 && errors.As(err, &pgErr) {
		// PostgreSQL refused the batch as a whole, which no reply's
		// state explains (write_batch refuses those one by one): write
		// each reply on its own, so that only the culprit fails.
		c.log.Warn("write a batch: refused whole; writing its replies one by one", "err", err, "replies", len(parts))
		for i, p := range parts {
			end := len(wire)
			if i+1 < len(parts) {
				end = parts[i+1].first
			}
			refused, err := c.writeOps(ctx, wire[p.first:end])
			p.first = 0
			c.settle([]batchPart{p}, refused, err)
		}
		return
	}
	c.settle(parts, refused, err)
}

// writeOps encodes ops and writes them as one batch.
func (c *committer) writeOps(ctx context.Context, ops []wireOp) ([]wdb.BatchWriteRow, error) {
	encoded, err := json.Marshal(ops)
	if err != nil {
		return nil, &writeError{what: "encode the batch", err: err}
	}
	start := time.Now()
	refused, err := c.write(ctx, withoutNUL(encoded))
	c.m.batchWritten(len(ops), time.Since(start), err)
	return refused, err
}

// withoutNUL replaces every escaped NUL (\u0000) of JSON text with
// U+FFFD: PostgreSQL's text and jsonb cannot hold NUL, and one in a
// model's text or a tool's output would fail the whole batch. Every
// backslash of encoded JSON starts an escape, so escapes are read in
// pairs and a literal backslash followed by "u0000" is left alone.
func withoutNUL(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u0000`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 == len(b) {
			out = append(out, b[i])
			continue
		}
		if bytes.HasPrefix(b[i+1:], []byte("u0000")) {
			out = append(out, `\ufffd`...)
			i += 5
			continue
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}

// write calls write_batch, retrying the same batch while the failure is
// the connection's or PostgreSQL asks for a retry, for at most a lease.
func (c *committer) write(ctx context.Context, ops []byte) ([]wdb.BatchWriteRow, error) {
	if !c.numbered {
		c.numberFromMark(ctx)
	}
	c.batch++
	arg := wdb.BatchWriteParams{Worker: c.worker, Batch: c.batch, Ops: ops, Lane: c.lane}
	renumbered := false
	giveUp := time.Now().Add(time.Duration(c.cfg.LeaseSeconds) * time.Second)
	delay := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		// Not cancelled with ctx: a batch in flight finishes, so that a
		// shutdown never leaves a reply's state unknown.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CallTimeout)
		rows, err := c.api.BatchWrite(cctx, arg)
		cancel()
		if sqlstate.Of(err) == sqlstate.IllegalState && !renumbered {
			// Another process numbered this worker's lane further
			// (the same name, or a clock that went back): go on from
			// its last batch. Nothing of this batch was applied.
			renumbered = true
			c.numberFromMark(ctx)
			c.batch++
			arg.Batch = c.batch
			continue
		}
		if err == nil || !retryable(err) || time.Now().Add(delay).After(giveUp) {
			if err != nil {
				err = &writeError{what: "write the batch", err: err}
			}
			return rows, err
		}
		c.log.Warn("write a batch: retrying", "err", err, "attempt", attempt, "ops_bytes", len(ops), "retry_in", delay)
		time.Sleep(delay)
		delay = min(2*delay, 2*time.Second)
	}
}

// settle tells each writer of a batch what became of its ops: applied, or
// refused from one op on (its prompt's row in refused), or all failed
// with err.
func (c *committer) settle(parts []batchPart, refused []wdb.BatchWriteRow, err error) {
	byPrompt := make(map[uuid.UUID]wdb.BatchWriteRow, len(refused))
	for _, r := range refused {
		byPrompt[r.PromptID] = r
	}
	for _, p := range parts {
		if err != nil {
			p.w.settled(p.ops, 0, err)
			continue
		}
		r, ok := byPrompt[p.w.promptID]
		if !ok {
			p.w.settled(p.ops, len(p.ops), nil)
			continue
		}
		applied := min(max(int(r.OpIndex)-p.first, 0), len(p.ops))
		what := "write"
		if applied < len(p.ops) {
			what = p.ops[applied].describe()
		}
		p.w.settled(p.ops, applied, &writeError{what: what, err: &pgconn.PgError{Code: r.Code, Message: r.Message}})
	}
}

// shutdown settles every writer's queued ops with errShutdown and refuses
// new writers.
func (c *committer) shutdown() {
	c.mu.Lock()
	c.stopped = true
	writers := slices.Collect(func(yield func(*writer) bool) {
		for w := range c.writers {
			if !yield(w) {
				return
			}
		}
	})
	c.mu.Unlock()
	for _, w := range writers {
		w.abandon(errShutdown)
	}
}

// numberFromMark makes the next batch number follow the last one
// write_batch applied for this worker and lane, if that is further than
// the clock.
func (c *committer) numberFromMark(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CallTimeout)
	defer cancel()
	if mark, err := c.api.BatchMark(cctx, wdb.BatchMarkParams{Worker: c.worker, Lane: c.lane}); err == nil {
		c.batch = max(c.batch, mark)
		c.numbered = true
	} else if errors.Is(err, pgx.ErrNoRows) {
		c.numbered = true
	}
}

// retryable reports whether a failed call of write_batch may be tried
// again as it was: the connection failed (the batch may or may not have
// committed; write_batch applies it once), or PostgreSQL refused the
// transaction for a reason of its own (a deadlock, a serialization
// failure, a shutdown or restart, too many connections).
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return connectionLost(err) || errors.Is(err, context.DeadlineExceeded)
	}
	switch pgErr.Code[:2] {
	case "40", "08", "57", "53":
		return pgErr.Code != "57014" // a statement cancelled by its timeout is not retried
	}
	return false
}
