package main

import (
	"context"
	"time"
)

// reapLeases fails running prompts whose worker stopped heartbeating, so a
// crashed worker's reply ends even when no other worker claims anything.
func (m *Main) reapLeases(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := m.store.ExpireLeases(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			m.Logger.Warn("expiring prompt leases failed", "err", err)
		case n > 0:
			m.metrics.leasesExpired.Add(float64(n))
			m.Logger.Info("failed prompts whose lease expired", "count", n)
		}
	}
}

// compactBatch is how many prompts one compaction transaction takes on.
const compactBatch = 100

// compactEvery is how often the compactor looks for prompts to compact: a
// tenth of the retention, between one second and one minute.
func compactEvery(after time.Duration) time.Duration {
	return min(max(after/10, time.Second), time.Minute)
}

// compactEvents merges the delta events of prompts that finished more than
// Config.CompactAfter ago (convo.compact_events), so the event log does
// not keep one row per token forever. Every server runs it; they skip each
// other's prompts. A full batch is followed at once by the next.
func (m *Main) compactEvents(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			res, err := m.store.CompactEvents(ctx, m.Config.CompactAfter, compactBatch)
			if err != nil {
				if ctx.Err() == nil {
					m.Logger.Warn("compacting events failed", "err", err)
				}
				break
			}
			m.metrics.promptsCompacted.Add(float64(res.Prompts))
			m.metrics.eventsCompacted.Add(float64(res.EventsRemoved))
			if res.Prompts > 0 {
				m.Logger.Debug("compacted events", "prompts", res.Prompts, "events_removed", res.EventsRemoved)
			}
			if res.Prompts < compactBatch {
				break
			}
		}
	}
}
