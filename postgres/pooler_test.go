package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/postgres"
)

// TestTransactionPooler: through PgBouncer in transaction mode, a pool
// set up by ForTransactionPooler runs the same queries again and again
// from many connections at once, in and out of transactions, where pgx's
// default (named prepared statements) fails once a query meets a server
// connection that did not prepare it; and TransactionPooled tells the two
// configurations apart.
func TestTransactionPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pooled := pgtest.PgBouncer(t, pgtest.DSN(t))[0]
	open := func(forPooler bool) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(pooled)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 3 * pgtest.PgBouncerPoolSize
		if forPooler {
			postgres.ForTransactionPooler(cfg)
		}
		if got := postgres.TransactionPooled(cfg.ConnConfig); got != forPooler {
			t.Errorf("TransactionPooled = %v for a configuration set up for a pooler: %v", got, forPooler)
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	// run runs two queries 40 times on each of the pool's connections at
	// once, and returns the first error.
	run := func(pool *pgxpool.Pool) error {
		var wg sync.WaitGroup
		errs := make(chan error, 1)
		for range pool.Config().MaxConns {
			wg.Go(func() {
				conn, err := pool.Acquire(ctx)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				defer conn.Release()
				for i := range 40 {
					var n int
					err := conn.QueryRow(ctx, `SELECT count(*)::int FROM convo.conversations WHERE owner_id = $1`, "x").Scan(&n)
					if err == nil {
						var s string
						err = conn.QueryRow(ctx, `SELECT $1::text || $2::int`, "a", i).Scan(&s)
					}
					if err != nil {
						select {
						case errs <- err:
						default:
						}
						return
					}
				}
			})
		}
		wg.Wait()
		select {
		case err := <-errs:
			return err
		default:
			return nil
		}
	}
	if err := run(open(true)); err != nil {
		t.Errorf("through PgBouncer with ForTransactionPooler: %v", err)
	}
	// The default fails there: the reason for ForTransactionPooler.
	if err := run(open(false)); err == nil || !strings.Contains(err.Error(), "prepared statement") {
		t.Errorf("through PgBouncer with pgx's default mode: %v; want an error about a prepared statement", err)
	}
}
