package postgres

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/convo-dev/convo/postgres/dbq"
)

// ServerKeyBytes is the size of a key ServerKey generates.
const ServerKeyBytes = 32

// ServerKey returns the secret kept in the database under name
// (convo.server_keys), generating and storing a random one of
// ServerKeyBytes the first time any process asks: every convo process on
// the database gets the same key. Errors are the database's (Unavailable
// when it cannot be reached).
func (s *Store) ServerKey(ctx context.Context, name string) ([]byte, error) {
	key := make([]byte, ServerKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate server key %q: %w", name, err)
	}
	// Two processes storing at once: the second's statement may not see
	// the first's row (its snapshot is older) and answers none; the next
	// statement does.
	for range 3 {
		keys, err := s.q.ServerKey(ctx, dbq.ServerKeyParams{Name: name, Key: key})
		if err != nil {
			return nil, translate(err, "server key "+name)
		}
		if len(keys) > 0 {
			return keys[0], nil
		}
	}
	return nil, fmt.Errorf("server key %q: stored by another process but not readable", name)
}
