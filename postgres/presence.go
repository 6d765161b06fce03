package postgres

import "context"

// NotifyPresence sends one payload of presence records on the
// convo_presence channel (package presence) to every server listening on
// the database. Nothing is stored; a NOTIFY works through a transaction
// pooler too. It returns the database's error.
func (s *Store) NotifyPresence(ctx context.Context, payload string) error {
	return s.q.PresenceNotify(ctx, payload)
}
