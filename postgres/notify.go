package postgres

import (
	"context"
	"fmt"
)

// SetEventNotify sets whether this database's events notify "convo_events"
// (convo.set_event_notify): the NOTIFY feed needs it on, the logical
// replication feed runs with it off. It takes effect for connections opened
// afterwards (and the one that ran it); it reports whether the database's
// setting changed. Changing it needs the database's owner or a superuser.
func (s *Store) SetEventNotify(ctx context.Context, enabled bool) (changed bool, err error) {
	changed, err = s.q.EventNotifySet(ctx, enabled)
	if err != nil {
		return false, fmt.Errorf("set convo.notify_events for the database: %w", err)
	}
	return changed, nil
}
