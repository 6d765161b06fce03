package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/postgres"
)

// EnvPooler names the environment variable that puts the pools of the
// suites that support it (connectapi, worker) behind a PgBouncer in
// transaction mode, as a deployment with CONVO_DB_POOL_MODE=transaction
// has them: "pgbouncer". scripts/test.sh runs those suites again so.
const EnvPooler = "CONVO_TEST_POOLER"

// Pooler reports whether this run puts the suites' pools behind
// PgBouncer (EnvPooler=pgbouncer). Another value fails the test, naming
// the variable.
func Pooler(t testing.TB) bool {
	t.Helper()
	switch v := os.Getenv(EnvPooler); v {
	case "":
		return false
	case "pgbouncer":
		return true
	default:
		t.Fatalf("pgtest: %s=%q: want pgbouncer, or unset", EnvPooler, v)
		return false
	}
}

// ClientPool opens the pool a suite's servers and workers use on the
// database at dsn (a URL from DSN), closed when the test ends: on dsn
// itself, or, with Pooler, through a PgBouncer in transaction mode started
// for the test, without named prepared statements
// (postgres.ForTransactionPooler), as a server behind one runs. configure,
// when not nil, changes the configuration first; the listener and the
// logical feed, which need a session, connect to dsn directly. Its
// connections scan JSON as the servers' do (postgres.KeepRawJSON).
func ClientPool(t testing.TB, dsn string, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	url := dsn
	if Pooler(t) {
		url = PgBouncer(t, dsn)[0]
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	postgres.KeepRawJSON(cfg)
	if Pooler(t) {
		postgres.ForTransactionPooler(cfg)
	}
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
