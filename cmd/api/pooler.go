package main

import (
	"cmp"
	"errors"
	"fmt"
)

// The modes of CONVO_DB_POOL_MODE: what sits between the server's pools
// and PostgreSQL (docs/deploy.md, "Poolers").
const (
	// poolModeSession: DATABASE_URL reaches PostgreSQL directly, or through
	// a pooler in session mode; every connection is a session of its own
	// (the default).
	poolModeSession = "session"
	// poolModeTransaction: DATABASE_URL goes through a pooler in
	// transaction mode (PgBouncer's pool_mode = transaction): no named
	// prepared statements, no session state, and no LISTEN or
	// replication through it; CONVO_DIRECT_DATABASE_URL is then required.
	poolModeTransaction = "transaction"
)

// checkPooler refuses a pool mode it does not know, and the transaction
// mode without the direct URL its listener, logical feed and migrations
// need, naming the settings.
func (c *Config) checkPooler() error {
	switch c.DBPoolMode {
	case poolModeSession:
		return nil
	case poolModeTransaction:
	default:
		return fmt.Errorf("CONVO_DB_POOL_MODE (--db-pool-mode) is %q: want %q (DATABASE_URL reaches PostgreSQL directly or through a session pooler) "+
			"or %q (DATABASE_URL goes through a transaction pooler such as PgBouncer with pool_mode = transaction)",
			c.DBPoolMode, poolModeSession, poolModeTransaction)
	}
	if c.DatabaseURL == "" {
		return errors.New("CONVO_DB_POOL_MODE=transaction needs DATABASE_URL (the pooler's URL): the embedded PostgreSQL has no pooler")
	}
	if c.DirectDatabaseURL == "" {
		return errors.New("CONVO_DB_POOL_MODE=transaction needs CONVO_DIRECT_DATABASE_URL: a URL that reaches PostgreSQL directly " +
			"(or through a session pooler), for what a transaction pooler cannot carry: the LISTEN connection of the stream feed " +
			"and the workers, the logical feed's replication connection, and the migrations' session lock")
	}
	return nil
}

// transactionPooled reports whether DATABASE_URL goes through a
// transaction pooler.
func (c *Config) transactionPooled() bool { return c.DBPoolMode == poolModeTransaction }

// directDatabaseURL is the URL of the connections that must be sessions
// of their own: the listener, the logical feed, the migrations.
func (c *Config) directDatabaseURL(dsn string) string { return cmp.Or(c.DirectDatabaseURL, dsn) }
