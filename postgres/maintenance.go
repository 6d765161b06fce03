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

// Restore says what NoteDatabaseIdentity found.
type Restore struct {
	// Restored is true when the database is not the one last noted: it
	// was restored from a backup or copied to another cluster.
	Restored bool
	// Conversations is how many conversations' seqs moved forward.
	Conversations int64
	// Running is how many replies were running in the restored data;
	// they are failed (their workers' leases ended).
	Running int64
}

// NoteDatabaseIdentity compares the database's identity (cluster, oid,
// timeline) with the one last noted (convo.note_database_identity). On a
// restored database it moves every conversation's seq past anything the
// original can have written, so that no client resumes from a seq the
// two logs do not share, and ends the leases of the original's workers.
// Servers call it at start, before serving a stream.
func (s *Store) NoteDatabaseIdentity(ctx context.Context) (Restore, error) {
	row, err := s.q.NoteDatabaseIdentity(ctx)
	if err != nil {
		return Restore{}, translate(err, "note the database's identity")
	}
	return Restore{Restored: row.Restored, Conversations: row.Conversations, Running: row.Running}, nil
}
