package pgtest

import (
	"context"
	"fmt"
)

// Env names the variables Run gives the command it runs.
const (
	// EnvAdminURL holds a connection string for a maintenance database of
	// the server, where the command may CREATE DATABASE.
	EnvAdminURL = "CONVO_TEST_ADMIN_URL"
	// EnvTemplate holds the name of the migrated template database: a test
	// gets its own database with CREATE DATABASE <name> TEMPLATE <template>,
	// and a connection string for it by putting that name in
	// CONVO_TEST_ADMIN_URL's path.
	EnvTemplate = "CONVO_TEST_TEMPLATE"
)

// Run chooses and prepares the server as the Go tests do (the package's
// order: CONVO_TEST_DATABASE_URL, Docker, the local binaries), migrates a
// template database on it, and calls fn with the environment a test
// suite in another language needs to make its own databases (EnvAdminURL,
// EnvTemplate). It releases the server when fn returns; failed keeps the
// private cluster's log, as for failed Go tests. The TypeScript and Python
// worker SDKs' tests run under it (package withdb).
func Run(ctx context.Context, fn func(env map[string]string) (failed bool, err error)) error {
	srv, err := setup(ctx)
	if err != nil {
		return err
	}
	failed, err := fn(map[string]string{EnvAdminURL: srv.adminDSN, EnvTemplate: srv.template})
	if cerr := srv.close(context.WithoutCancel(ctx), failed || err != nil); cerr != nil && err == nil {
		err = fmt.Errorf("pgtest: release the test server: %w", cerr)
	}
	return err
}
