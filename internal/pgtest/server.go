package pgtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/convo-dev/convo/pgembed"
)

// testServer is the PostgreSQL server the databases of this test binary
// live on, with its migrated template database.
type testServer struct {
	source   string // where the server comes from, for messages
	adminDSN string // a maintenance database on the server (never the template)
	template string // the migrated template database, once created
	// cloneStrategy is the STRATEGY clause createDatabase adds, or ""
	// (chooseCloneStrategy).
	cloneStrategy string

	cluster      *pgembed.Cluster                             // the private cluster; nil for other sources
	dropTemplate bool                                         // the server outlives us: drop the template at teardown
	release      func(ctx context.Context, failed bool) error // stops what this process started; may be nil
}

// chosen holds the outcome of choosing and preparing the server, which
// happens once per test binary, on first use.
var chosen struct {
	once sync.Once
	srv  *testServer
	err  error
}

// logger is for messages about the servers pgtest runs; tests' own output
// is not cluttered by routine ones.
var logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// setupTimeout bounds choosing the server, starting it (which may include
// pulling a container image) and migrating the template.
const setupTimeout = 5 * time.Minute

// server returns the test binary's server, preparing it on first use, and
// fails t when there is none.
func server(t testing.TB) *testServer {
	t.Helper()
	chosen.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		chosen.srv, chosen.err = setup(ctx)
	})
	if chosen.err != nil {
		t.Fatal(chosen.err)
	}
	return chosen.srv
}

func setup(ctx context.Context) (*testServer, error) {
	srv, err := pickServer(ctx)
	if err != nil {
		return nil, err
	}
	if err := srv.createTemplate(ctx); err != nil {
		srv.close(ctx, true)
		return nil, fmt.Errorf("pgtest: prepare template database on %s: %w", srv.source, err)
	}
	return srv, nil
}

// pickServer applies the order documented on the package.
func pickServer(ctx context.Context) (*testServer, error) {
	if dsn := os.Getenv(EnvDatabaseURL); dsn != "" {
		srv, err := externalServer(ctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("pgtest: %s: %w", EnvDatabaseURL, err)
		}
		return srv, nil
	}
	srv, dockerErr := containerServer(ctx)
	if dockerErr == nil {
		return srv, nil
	}
	if !errors.Is(dockerErr, errNoDocker) {
		logger.Warn("pgtest: Docker answers but the postgres container did not start; using local binaries",
			"err", dockerErr)
	}
	srv, localErr := embeddedServer(ctx)
	if localErr == nil {
		return srv, nil
	}
	return nil, fmt.Errorf("pgtest: no PostgreSQL server for the tests. Either install the PostgreSQL 15 server "+
		"binaries (Debian/Ubuntu: apt-get install postgresql-15), set %s to a server where the test user may "+
		"CREATE DATABASE, or start a Docker engine.\n  local binaries: %v\n  Docker: %v",
		EnvDatabaseURL, localErr, dockerErr)
}

// externalServer uses the server at dsn, which outlives the tests.
func externalServer(ctx context.Context, dsn string) (*testServer, error) {
	srv := &testServer{source: EnvDatabaseURL, adminDSN: dsn, dropTemplate: true}
	if err := srv.ping(ctx); err != nil {
		return nil, err
	}
	return srv, nil
}

// close drops the template if the server outlives us and releases what
// this process started.
func (s *testServer) close(ctx context.Context, failed bool) error {
	var errs []error
	if s.dropTemplate && s.template != "" {
		errs = append(errs, s.dropDatabase(ctx, s.template))
	}
	if s.release != nil {
		errs = append(errs, s.release(ctx, failed))
	}
	return errors.Join(errs...)
}

// teardown releases the server after the tests, if one was prepared.
func teardown(failed bool) {
	if chosen.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := chosen.srv.close(ctx, failed); err != nil {
		logger.Error("pgtest: release the test server", "source", chosen.srv.source, "err", err)
	}
}
