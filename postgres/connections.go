package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ConnectionUse is one kind of connection a process opens: a pool (at most
// Conns at once) or a dedicated connection, with the setting that sizes
// it, for the message of CheckConnections.
type ConnectionUse struct {
	What    string // "API pool", "worker pool", "listener", …
	Conns   int
	Setting string // the setting to change, or ""
}

// ErrTooManyConnections is wrapped by the error of CheckConnections when
// the uses cannot fit.
var ErrTooManyConnections = errors.New("connections do not fit in max_connections")

// CheckConnections fails, wrapping ErrTooManyConnections, when uses open
// more connections together than PostgreSQL gives roles that are not
// superusers (max_connections − superuser_reserved_connections −
// reserved_connections), with a message that lists them and says what to
// change. A process that passes
// never makes PostgreSQL answer "too many clients" on its own; servers
// sharing one database must fit together (docs/deploy.md, "Connections").
func (s *Store) CheckConnections(ctx context.Context, uses []ConnectionUse) error {
	limits, err := s.q.ConnectionLimits(ctx)
	if err != nil {
		return fmt.Errorf("read max_connections: %w", err)
	}
	allowed := int(limits.MaxConnections - limits.SuperuserReserved)
	need := TotalConnections(uses)
	var parts, settings []string
	for _, u := range uses {
		parts = append(parts, fmt.Sprintf("%s %d", u.What, u.Conns))
		if u.Setting != "" {
			settings = append(settings, u.Setting)
		}
	}
	if need <= allowed {
		return nil
	}
	return fmt.Errorf("%w: this process opens up to %d connections (%s) but PostgreSQL allows %d (max_connections %d − %d reserved): lower %s, or raise max_connections",
		ErrTooManyConnections, need, strings.Join(parts, ", "), allowed, limits.MaxConnections, limits.SuperuserReserved,
		strings.Join(settings, " or "))
}

// TotalConnections is the sum of uses' connections.
func TotalConnections(uses []ConnectionUse) int {
	n := 0
	for _, u := range uses {
		n += u.Conns
	}
	return n
}
