package pgtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// errNoDocker marks the absence of a Docker engine, as opposed to a
// container that failed to start.
var errNoDocker = errors.New("no Docker engine answers")

// containerImage matches the PostgreSQL major version of the local binaries
// the project targets.
const containerImage = "postgres:15"

// containerServer runs PostgreSQL in a container when a Docker engine
// answers. The engine is asked, not guessed from a docker executable,
// which exists on machines without an engine. testcontainers' reaper
// removes the container if this process dies before releasing it.
func containerServer(ctx context.Context) (*testServer, error) {
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoDocker, err)
	}
	healthCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := provider.Health(healthCtx); err != nil { // Health also closes the provider
		return nil, fmt.Errorf("%w: %v", errNoDocker, err)
	}

	ctr, err := tcpostgres.Run(ctx, containerImage,
		testcontainers.WithCmdArgs(
			"-c", "wal_level=logical",
			"-c", "max_replication_slots=20",
			"-c", "max_wal_senders=20",
			"-c", "max_connections=200",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off"),
		tcpostgres.BasicWaitStrategies())
	if err != nil {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		return nil, fmt.Errorf("run %s container: %w", containerImage, err)
	}
	dsn, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, fmt.Errorf("%s container address: %w", containerImage, err)
	}
	return &testServer{
		source:   "a Docker container (" + containerImage + ")",
		adminDSN: dsn,
		release: func(context.Context, bool) error {
			return testcontainers.TerminateContainer(ctr)
		},
	}, nil
}
