package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// WorkerDSN returns a connection string for the database of dsn (from DSN)
// as a login of the worker role convo_worker, which the migrations create:
// a connection that may only call the SQL worker API (docs/deploy.md, "The
// worker role"). The login is a role of its own, made for this test and
// dropped when it ends (roles belong to the whole server, which parallel
// tests and test binaries share). It fails the test when the role cannot
// be made.
func WorkerDSN(t testing.TB, dsn string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: worker login: %v", err)
	}
	defer conn.Close(context.Background())
	role, password := "convo_worker_test_"+randomSuffix(), randomSuffix()
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s' IN ROLE convo_worker", ident(role), password)); err != nil {
		t.Fatalf("pgtest: worker login: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Logf("pgtest: drop the worker login: %v", err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP ROLE IF EXISTS "+ident(role)); err != nil {
			t.Logf("pgtest: drop the worker login: %v", err)
		}
	})
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		// In keyword/value strings the last occurrence of a keyword wins.
		return dsn + " user=" + role + " password=" + password
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("pgtest: worker login: %v", err)
	}
	u.User = url.UserPassword(role, password)
	return u.String()
}
