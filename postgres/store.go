// Package postgres implements conversation.Store on PostgreSQL with the
// queries sqlc generates into package dbq (from db/queries).
package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// Store is the PostgreSQL conversation.Store.
type Store struct {
	pool *pgxpool.Pool
	q    *dbq.Queries
	// searchTimeout bounds one search (SetSearchTimeout).
	searchTimeout time.Duration
	// sends groups concurrent SendMessages into shared transactions.
	sends *sender
	// eventBytes bounds a branchSwitched's messages in the transaction of
	// each path change (SetSnapshotBytes); 0: the session's bound.
	eventBytes int
}

var _ conversation.Store = (*Store)(nil)

// New returns a Store on pool. The pool's database must be migrated
// (db.Migrate).
func New(pool *pgxpool.Pool) *Store {
	q := dbq.New(pool)
	return &Store{pool: pool, q: q, searchTimeout: DefaultSearchTimeout, sends: newSender(q)}
}

// Queries exposes the generated queries on the store's pool, for the worker
// runtime and tests that call the SQL worker API.
func (s *Store) Queries() *dbq.Queries { return s.q }

// readSnapshot runs fn in one REPEATABLE READ, READ ONLY transaction, so
// every query in it sees the same committed state.
func (s *Store) readSnapshot(ctx context.Context, fn func(q *dbq.Queries) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin snapshot: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := fn(s.q.WithTx(tx)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
