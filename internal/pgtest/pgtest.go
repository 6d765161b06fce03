// Package pgtest gives each test its own freshly migrated PostgreSQL
// database, so tests can call t.Parallel freely and never share state.
//
// The server is chosen once per test binary, in this order:
//
//  1. CONVO_TEST_DATABASE_URL, when set: an existing server where the test
//     user may CREATE DATABASE;
//  2. a postgres:15 container started through testcontainers, when a Docker
//     engine answers;
//  3. a private cluster started from the local PostgreSQL binaries by
//     package pgembed, in a temporary directory, with wal_level=logical and
//     durability turned off for speed.
//
// If none is available, every test that asks for a database fails (it is
// never skipped) with instructions.
//
// The schema (package db) is migrated once per test binary into a template
// database; each DSN call clones it with CREATE DATABASE ... TEMPLATE (tens
// of milliseconds) and drops the clone when the test ends. On Linux the
// private cluster lives in /dev/shm when that has 2 GiB free, which makes
// clones several times faster than on disk.
//
// A package that uses pgtest should have
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// so that the server is released when its tests end. Without it the
// private cluster still stops when the test binary exits, and its
// directory is deleted by a later test run.
package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/pgembed"
	"github.com/convo-dev/convo/postgres"
)

// EnvDatabaseURL names the environment variable that points the tests at an
// existing server instead of a private one.
const EnvDatabaseURL = "CONVO_TEST_DATABASE_URL"

// DSN creates a new database holding the migrated schema and returns a
// connection string for it. The database is dropped when the test and its
// subtests end (best effort: a failed drop is only logged). It is safe to
// call from parallel tests. It fails the test when no server is available
// or the database cannot be created.
func DSN(t testing.TB) string {
	t.Helper()
	srv := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, dsn, err := srv.createDatabase(ctx)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.dropDatabase(ctx, name); err != nil {
			t.Logf("pgtest: %v", err)
		}
	})
	return dsn
}

// Pool returns a pgxpool (with pgxpool's default settings) on a new
// database from DSN. The pool is closed, then the database dropped, when
// the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return PoolWith(t, nil)
}

// PoolWith is Pool with its configuration changed by configure first
// (nil: none), such as the runtime parameters of its connections. Its
// connections scan JSON as the servers' do (postgres.KeepRawJSON).
func PoolWith(t testing.TB, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(DSN(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	postgres.KeepRawJSON(cfg)
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

// Cluster returns the private local cluster the databases of this test
// binary live on, for tests that simulate an outage with Restart. A
// restart drops the connections of every test in the binary, so a test
// that restarts must not call t.Parallel.
//
// The test is skipped, saying why, when the databases live on another
// server (CONVO_TEST_DATABASE_URL or a Docker container), which this
// process cannot restart.
func Cluster(t testing.TB) *pgembed.Cluster {
	t.Helper()
	srv := server(t)
	if srv.cluster == nil {
		t.Skipf("pgtest: this test restarts the database server, which only works with the private local cluster; "+
			"the tests use %s instead (unset %s and stop Docker to run it)", srv.source, EnvDatabaseURL)
	}
	return srv.cluster
}

// Main runs the tests of m, releases the server if this process started
// one (stops the cluster and deletes its directory, or removes the
// container; on an existing server, drops the template database), calls
// each of after (such as testbin.Remove) and exits with the tests' status.
// Call it from TestMain. When tests failed, the private cluster's log is
// kept and its path printed.
func Main(m *testing.M, after ...func()) {
	code := m.Run()
	teardown(code != 0)
	for _, f := range after {
		f()
	}
	os.Exit(code)
}
