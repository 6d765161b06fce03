package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/convo-dev/convo/conversation"
)

// DefaultSnapshotConns is the size of a SnapshotReader's pool when the
// server is not told otherwise (CONVO_SNAPSHOT_CONNS).
const DefaultSnapshotConns = 2

// MaxSnapshotGroup is the most snapshots one group read holds: the first
// of a larger burst is not kept waiting for the last one's rows, and what
// one read brings into memory stays bounded.
const MaxSnapshotGroup = 128

// SnapshotReader reads snapshots (RecentState) in groups, on a pool of
// its own. A request that finds a connection free is read at once, alone;
// requests that come while every connection reads wait, and the next
// connection free reads all of them (up to MaxSnapshotGroup) in one
// RecentStates. So a burst of joiners (a reconnect storm) costs a few
// group reads rather than one read each, and neither they nor their reads
// hold the connections that sends and live events use. It is safe for
// concurrent use, and a prometheus.Collector of its counts.
type SnapshotReader struct {
	store *Store
	// readers is how many groups may be read at once: the pool's size.
	readers int

	mu      sync.Mutex
	queue   []*snapshotCall
	running int

	reads     prometheus.Counter
	requests  prometheus.Counter
	groupSize prometheus.Histogram
	readCount atomic.Int64
}

// snapshotCall is one waiting RecentState.
type snapshotCall struct {
	ctx  context.Context
	req  StateRequest
	done chan StateResult // buffered: the reader never waits for the caller
}

// NewSnapshotReader returns a reader on pool, whose MaxConns bounds the
// group reads at once. The pool's database must be migrated.
func NewSnapshotReader(pool *pgxpool.Pool) *SnapshotReader {
	return &SnapshotReader{
		store:   New(pool),
		readers: max(1, int(pool.Config().MaxConns)),
		reads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_snapshot_reads_total",
			Help: "Group reads of streams' snapshots: one transaction each, however many snapshots it holds.",
		}),
		requests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_snapshot_requests_total",
			Help: "Snapshots asked for by new streams (each read in some group read).",
		}),
		groupSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "convo_snapshot_group_size",
			Help:    "Snapshots read by one group read.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
		}),
	}
}

// RecentState reads as Store.RecentState does, in the next group read:
// the same state and the same errors (NotFound for an unknown or foreign
// conversation, for this caller only), and ctx's error when ctx ends
// first (the group read goes on for the others).
func (r *SnapshotReader) RecentState(ctx context.Context, ownerID string, conversationID uuid.UUID, maxBytes int) (conversation.State, error) {
	if maxBytes <= 0 {
		return conversation.State{}, fmt.Errorf("postgres: RecentState: maxBytes must be positive, got %d", maxBytes)
	}
	if err := ctx.Err(); err != nil {
		return conversation.State{}, err
	}
	r.requests.Inc()
	c := &snapshotCall{
		ctx: ctx, req: StateRequest{OwnerID: ownerID, ConversationID: conversationID, MaxBytes: maxBytes},
		done: make(chan StateResult, 1),
	}
	r.mu.Lock()
	r.queue = append(r.queue, c)
	if r.running < r.readers {
		r.running++
		go r.run()
	}
	r.mu.Unlock()
	select {
	case res := <-c.done:
		return res.State, res.Err
	case <-ctx.Done():
		return conversation.State{}, ctx.Err()
	}
}

// Reads returns how many group reads the reader made.
func (r *SnapshotReader) Reads() int64 { return r.readCount.Load() }

// run reads groups until no request waits.
func (r *SnapshotReader) run() {
	for {
		r.mu.Lock()
		group := r.takeLocked()
		if len(group) == 0 {
			r.running--
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		r.read(group)
	}
}

// takeLocked removes up to MaxSnapshotGroup waiting requests from the
// queue, dropping those whose caller has gone. The caller holds r.mu.
func (r *SnapshotReader) takeLocked() []*snapshotCall {
	var group []*snapshotCall
	n := 0
	for _, c := range r.queue {
		n++
		if c.ctx.Err() != nil {
			continue
		}
		group = append(group, c)
		if len(group) == MaxSnapshotGroup {
			break
		}
	}
	rest := copy(r.queue, r.queue[n:])
	clear(r.queue[rest:])
	r.queue = r.queue[:rest]
	if rest == 0 && cap(r.queue) > MaxSnapshotGroup {
		r.queue = nil // a burst's array is not kept while idle
	}
	return group
}

// read reads group in one RecentStates and answers each request. The read
// ends early only when every caller of the group has gone.
func (r *SnapshotReader) read(group []*snapshotCall) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	left := atomic.Int64{}
	left.Store(int64(len(group)))
	reqs := make([]StateRequest, len(group))
	for i, c := range group {
		reqs[i] = c.req
		stop := context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	r.reads.Inc()
	r.readCount.Add(1)
	r.groupSize.Observe(float64(len(group)))
	results, err := r.store.RecentStates(ctx, reqs)
	for i, c := range group {
		if err != nil {
			c.done <- StateResult{Err: err}
			continue
		}
		c.done <- results[i]
	}
}

// Describe implements prometheus.Collector.
func (r *SnapshotReader) Describe(ch chan<- *prometheus.Desc) {
	r.reads.Describe(ch)
	r.requests.Describe(ch)
	r.groupSize.Describe(ch)
}

// Collect implements prometheus.Collector.
func (r *SnapshotReader) Collect(ch chan<- prometheus.Metric) {
	r.reads.Collect(ch)
	r.requests.Collect(ch)
	r.groupSize.Collect(ch)
}
