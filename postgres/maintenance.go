package postgres

import (
	"context"
	"time"

	"github.com/convo-dev/convo/postgres/dbq"
)

// CompactResult says what one CompactEvents call did.
type CompactResult struct {
	// Prompts is how many finished prompts were compacted.
	Prompts int
	// EventsRemoved is how many event rows the merges removed.
	EventsRemoved int64
}

// CompactEvents merges the delta events of up to maxPrompts prompts that
// finished more than olderThan ago (convo.compact_events). Several servers
// may call it at once: each skips the prompts another is compacting.
func (s *Store) CompactEvents(ctx context.Context, olderThan time.Duration, maxPrompts int) (CompactResult, error) {
	row, err := s.q.EventsCompact(ctx, dbq.EventsCompactParams{
		OlderThanSeconds: olderThan.Seconds(), MaxPrompts: int32(maxPrompts),
	})
	if err != nil {
		return CompactResult{}, translate(err, "compact events")
	}
	return CompactResult{Prompts: int(row.Prompts), EventsRemoved: row.EventsRemoved}, nil
}

// QueueStats is the prompt queue at one moment.
type QueueStats struct {
	Queued  int64
	Running int64
	// OldestQueued is how long the oldest queued prompt has waited.
	OldestQueued time.Duration
}

// PromptQueueStats reads the prompt queue's depth, for metrics.
func (s *Store) PromptQueueStats(ctx context.Context) (QueueStats, error) {
	row, err := s.q.PromptQueueStats(ctx)
	if err != nil {
		return QueueStats{}, translate(err, "read the prompt queue")
	}
	return QueueStats{
		Queued: row.Queued, Running: row.Running,
		OldestQueued: time.Duration(row.OldestQueuedSeconds * float64(time.Second)),
	}, nil
}
