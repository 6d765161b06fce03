package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/stream"
)

// The feeds CONVO_FEED chooses from. Every server on one database must use
// the same one: each sets the database's convo.notify_events for it.
const (
	// feedNotify is one LISTEN connection per server, woken by the NOTIFY
	// of every event (the default).
	feedNotify = "notify"
	// feedLogical is one logical replication connection per server; events
	// do not notify. It needs wal_level=logical and the REPLICATION
	// attribute.
	feedLogical = "logical"
)

func checkFeed(name string) error {
	switch name {
	case feedNotify, feedLogical:
		return nil
	}
	return fmt.Errorf("CONVO_FEED (--feed) is %q: want %q (LISTEN/NOTIFY) or %q (logical replication)", name, feedNotify, feedLogical)
}

// newFeed returns the configured feed of m.hub, after checking that it can
// work here, and sets whether the database's events notify: on for the
// notify feed, off for the logical one, which then spares every writer the
// NOTIFY.
func (m *Main) newFeed(ctx context.Context, connConfig *pgx.ConnConfig) (stream.Feed, error) {
	logical := m.Config.Feed == feedLogical
	var feed stream.Feed
	if logical {
		lf := &stream.LogicalFeed{ConnConfig: connConfig.Copy(), Hub: m.hub, Logger: m.Logger}
		if err := lf.Check(ctx); err != nil {
			return nil, fmt.Errorf("CONVO_FEED=logical: %w", err)
		}
		feed = lf
	} else {
		feed = &stream.NotifyFeed{Listener: m.pgListener, Hub: m.hub, Logger: m.Logger}
	}

	changed, err := m.store.SetEventNotify(ctx, !logical)
	switch {
	case err != nil && logical:
		// Streams still work; writers just keep paying for NOTIFY.
		m.Logger.Warn("could not turn off the NOTIFY of events for this database (as its owner: SELECT convo.set_event_notify(false))",
			"err", err)
	case err != nil:
		return nil, fmt.Errorf("CONVO_FEED=notify needs events to notify, and this database may have them off "+
			"(a server with CONVO_FEED=logical turns them off): as the database's owner run SELECT convo.set_event_notify(true), "+
			"or use CONVO_FEED=logical: %w", err)
	case changed:
		m.Logger.Info("set whether this database's events notify; every server on this database must use the same CONVO_FEED",
			"feed", m.Config.Feed, "notify_events", !logical)
	}
	// Connections opened before the change keep the old setting.
	m.pool.Reset()
	return feed, nil
}
