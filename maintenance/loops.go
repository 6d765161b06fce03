package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/postgres"
)

// Options configure the loops. The zero value of every field but Store
// means its default.
type Options struct {
	// Store is the database the loops work on (required).
	Store *postgres.Store
	// ReapEvery is how often expired leases are looked for. Default 5 s.
	ReapEvery time.Duration
	// CompactAfter is how long after a prompt finishes its delta events
	// are merged; 0 turns compaction off.
	CompactAfter time.Duration
	// Logger defaults to slog.Default.
	Logger *slog.Logger
	// Files, when set, is collected every CollectFilesEvery(FileGrace):
	// the files no message holds that are older than FileGrace, and the
	// bytes no file needs any more (files.Service.Collect).
	Files     *files.Service
	FileGrace time.Duration
}

// CompactBatch is how many prompts one compaction transaction takes on.
const CompactBatch = 100

// CompactEvery is how often the compactor looks for prompts to compact: a
// tenth of the retention, between one second and one minute.
func CompactEvery(after time.Duration) time.Duration {
	return min(max(after/10, time.Second), time.Minute)
}

// CollectFilesEvery is how often the file collector runs: a tenth of the
// grace period, between one second and five minutes.
func CollectFilesEvery(grace time.Duration) time.Duration {
	return min(max(grace/10, time.Second), 5*time.Minute)
}

// Loops are the reaper, the compactor and the file collector with their
// counters. It is a prometheus.Collector of
// convo_prompt_leases_expired_total, convo_compaction_prompts_total,
// convo_compaction_events_removed_total and convo_files_collected_total.
type Loops struct {
	opts Options

	leasesExpired    prometheus.Counter
	promptsCompacted prometheus.Counter
	eventsCompacted  prometheus.Counter
	filesCollected   prometheus.Counter
}

var _ prometheus.Collector = (*Loops)(nil)

// New returns the loops opts describe, not yet running (see Run).
func New(opts Options) *Loops {
	if opts.ReapEvery <= 0 {
		opts.ReapEvery = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Loops{
		opts: opts,
		leasesExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_prompt_leases_expired_total",
			Help: "Running prompts this process failed because their worker stopped heartbeating.",
		}),
		promptsCompacted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_compaction_prompts_total",
			Help: "Finished prompts whose delta events this process compacted.",
		}),
		eventsCompacted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_compaction_events_removed_total",
			Help: "Event rows removed by merging delta events.",
		}),
		filesCollected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_files_collected_total",
			Help: "Files this process deleted because no message held them for the grace period.",
		}),
	}
}

// Run runs the reaper, the compactor when CompactAfter > 0 and the file
// collector when Files is set, until ctx ends; then it returns, once all
// have stopped.
func (l *Loops) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { l.reapLeases(ctx) })
	if l.opts.CompactAfter > 0 {
		wg.Go(func() { l.compactEvents(ctx) })
	}
	if l.opts.Files != nil {
		wg.Go(func() { l.collectFiles(ctx) })
	}
	wg.Wait()
}

// Describe implements prometheus.Collector.
func (l *Loops) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range l.counters() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (l *Loops) Collect(ch chan<- prometheus.Metric) {
	for _, c := range l.counters() {
		c.Collect(ch)
	}
}

func (l *Loops) counters() []prometheus.Counter {
	return []prometheus.Counter{l.leasesExpired, l.promptsCompacted, l.eventsCompacted, l.filesCollected}
}

// collectFiles deletes the files no message holds once they are older
// than FileGrace, and the bytes no file needs (files.Service.Collect).
func (l *Loops) collectFiles(ctx context.Context) {
	every(ctx, CollectFilesEvery(l.opts.FileGrace), func() {
		n, err := l.opts.Files.Collect(ctx, l.opts.FileGrace)
		l.filesCollected.Add(float64(n))
		switch {
		case err != nil && ctx.Err() == nil:
			l.opts.Logger.Warn("collecting files failed", "err", err)
		case n > 0:
			l.opts.Logger.Info("deleted files no message held", "count", n)
		}
	})
}

// reapLeases fails running prompts whose worker stopped heartbeating, so a
// crashed worker's reply ends even when no other worker claims anything.
func (l *Loops) reapLeases(ctx context.Context) {
	every(ctx, l.opts.ReapEvery, func() {
		n, err := l.opts.Store.ExpireLeases(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			l.opts.Logger.Warn("expiring prompt leases failed", "err", err)
		case n > 0:
			l.leasesExpired.Add(float64(n))
			l.opts.Logger.Info("failed prompts whose lease expired", "count", n)
		}
	})
}

// compactEvents merges the delta events of prompts that finished more than
// CompactAfter ago (convo.compact_events), so the event log does not keep
// one row per token forever. A full batch is followed at once by the next.
func (l *Loops) compactEvents(ctx context.Context) {
	every(ctx, CompactEvery(l.opts.CompactAfter), func() {
		for ctx.Err() == nil {
			res, err := l.opts.Store.CompactEvents(ctx, l.opts.CompactAfter, CompactBatch)
			if err != nil {
				if ctx.Err() == nil {
					l.opts.Logger.Warn("compacting events failed", "err", err)
				}
				break
			}
			l.promptsCompacted.Add(float64(res.Prompts))
			l.eventsCompacted.Add(float64(res.EventsRemoved))
			if res.Prompts > 0 {
				l.opts.Logger.Debug("compacted events", "prompts", res.Prompts, "events_removed", res.EventsRemoved)
			}
			if res.Prompts < CompactBatch {
				break
			}
		}
	})
}

// every calls fn every interval until ctx ends; the first call is one
// interval after the start.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}
