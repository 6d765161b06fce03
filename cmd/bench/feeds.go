package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/stream"
)

// knownFeeds are the feeds --feeds accepts.
var knownFeeds = []string{"notify", "logical"}

// startFeed returns the Run of the named feed, fed from cfg (a connection
// of its own) into hub. The logical feed is checked first, so a server
// without wal_level=logical fails here instead of retrying forever.
func startFeed(ctx context.Context, name string, cfg *pgx.ConnConfig, hub stream.Sink, logger *slog.Logger) (func(context.Context), error) {
	cfg.RuntimeParams["application_name"] = "convo-bench-" + name
	if name == "logical" {
		f := &stream.LogicalFeed{ConnConfig: cfg, Hub: hub, Logger: logger}
		if err := f.Check(ctx); err != nil {
			return nil, err
		}
		return f.Run, nil
	}
	f := &stream.NotifyFeed{ConnConfig: cfg, Hub: hub, Logger: logger}
	return f.Run, nil
}

// setNotify turns the event log's NOTIFY on or off for the database
// (convo.set_event_notify, db/functions/events.sql): off while the
// logical feed is measured, as a deployment with that feed runs. Open
// sessions keep their value, so both pools start afresh.
func (m *Main) setNotify(ctx context.Context, on bool) error {
	if _, err := m.store.SetEventNotify(ctx, on); err != nil {
		return err
	}
	m.pool.Reset()
	m.writers.Reset()
	return nil
}
