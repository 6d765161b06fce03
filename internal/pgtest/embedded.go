package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/convo-dev/convo/pgembed"
)

// embeddedServer starts a private cluster in a new temporary directory.
// Each test binary gets its own directory and a free port, so the binaries
// that go test runs in parallel never share one.
func embeddedServer(ctx context.Context) (*testServer, error) {
	removeStaleDirs()
	dir, unlock, err := lockedTempDir()
	if err != nil {
		return nil, err
	}
	c, err := pgembed.Start(ctx, pgembed.Options{
		DataDir: filepath.Join(dir, "data"),
		Logical: true,
		Fast:    true,
		Logger:  logger,
	})
	if err != nil {
		unlock()
		os.RemoveAll(dir)
		return nil, err
	}
	return &testServer{
		source:   fmt.Sprintf("the private cluster (pgembed) on port %d", c.Port()),
		adminDSN: c.DSN("postgres"),
		cluster:  c,
		release: func(ctx context.Context, failed bool) error {
			err := c.Stop(ctx)
			if failed {
				logger.Warn("pgtest: tests failed; the server log is kept until the next test run",
					"log", c.LogFile())
				unlock() // a later run's removeStaleDirs deletes it
				return err
			}
			unlock()
			if rmErr := os.RemoveAll(dir); rmErr != nil && err == nil {
				err = rmErr
			}
			return err
		},
	}, nil
}
