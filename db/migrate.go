// Package db holds convo's PostgreSQL schema and applies it: the tables
// and their history in numbered goose migrations (schema/), and the current
// definition of every SQL function (functions/), applied after the
// migrations. sqlc compiles the queries in queries/ into package
// postgres/dbq (the store's), those in queries/worker/ into
// worker/internal/wdb (the Go worker runtime's) and those in
// queries/tests/ into internal/pgtest/apiq (the tests'). The tests of the
// SQL API, which call the functions as a worker or a client would, are
// this package's. README.md in this directory says where to change what.
package db

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed schema/*.sql
var schemaFS embed.FS

//go:embed functions/*.sql
var functionsFS embed.FS

// FunctionFiles are the files of functions/ in the order Migrate applies
// them: a function of LANGUAGE sql must come after the functions it calls
// (its body is checked when it is created; a plpgsql body only when it
// runs), and privileges.sql (who may call what) comes last, after every
// function it names was replaced. The SQL worker API is the worker_*.sql
// files and the client API the client_*.sql files, one topic each
// (db/README.md), applied where the two files they were split from were:
// the worker's prompts first (the helpers that end a prompt, which every
// other writer calls), then its claims, blocks, tool calls and pauses.
var FunctionFiles = []string{
	"branches.sql", "json.sql", "events.sql",
	"worker_prompts.sql", "worker_claims.sql", "worker_blocks.sql", "worker_tool_calls.sql", "worker_pauses.sql",
	"worker_reads.sql", "batch.sql",
	"client_conversations.sql", "client_messages.sql", "client_replies.sql", "client_feedback.sql", "client_inputs.sql",
	"items.sql", "compaction.sql", "invariants.sql", "search.sql", "restore.sql", "privileges.sql",
}

// WorkerRole is the group role that may only call the SQL worker API
// (docs/deploy.md, "The worker role"): the migrations create it when the
// user that migrates may create roles, and Migrate grants it the worker
// functions on every start. A worker's login is a member of it.
const WorkerRole = "convo_worker"

// functionsLock is the advisory lock key that serialises the application
// of functions/ by servers starting at once (two concurrent CREATE OR
// REPLACE of one function fail with "tuple concurrently updated").
const functionsLock = 0x636f6e766f66 // "convof"

// Migrate brings the database at dsn up to the newest schema version, then
// applies the current definition of every function (functions/, CREATE OR
// REPLACE, in one transaction). It is safe to call from several processes
// at once: goose serialises them with a session advisory lock, the
// functions with a transaction advisory lock.
func Migrate(ctx context.Context, dsn string) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("migrate: parse database url: %w", err)
	}
	sqlDB := stdlib.OpenDB(*cfg)
	defer sqlDB.Close()
	return migrateDB(ctx, sqlDB)
}

func migrateDB(ctx context.Context, sqlDB *sql.DB) error {
	schema, err := fs.Sub(schemaFS, "schema")
	if err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, schema,
		goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		slog.Debug("migration applied", "version", r.Source.Version, "duration", r.Duration)
	}
	if err := applyFunctions(ctx, sqlDB); err != nil {
		return err
	}
	var hasRole bool
	if err := sqlDB.QueryRowContext(ctx, "SELECT to_regrole($1) IS NOT NULL", WorkerRole).Scan(&hasRole); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if !hasRole {
		slog.Warn("there is no worker role: this database user may not create roles, so workers must connect as the owner; "+
			"docs/deploy.md (\"The worker role\") has the SQL an administrator runs to create it, and the next start grants it",
			"role", WorkerRole)
	}
	return nil
}

// applyFunctions applies functions/ in one transaction.
func applyFunctions(ctx context.Context, sqlDB *sql.DB) error {
	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: functions: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", functionsLock); err != nil {
		return fmt.Errorf("migrate: functions: lock: %w", err)
	}
	for _, name := range FunctionFiles {
		text, err := fs.ReadFile(functionsFS, "functions/"+name)
		if err != nil {
			return fmt.Errorf("migrate: functions: %w", err)
		}
		// No arguments: the simple protocol, which runs a file of many
		// statements in one call.
		if _, err := tx.ExecContext(ctx, string(text)); err != nil {
			return fmt.Errorf("migrate: functions/%s: %w", name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: functions: %w", err)
	}
	return nil
}

// Functions returns the text of functions/name.
func Functions(name string) ([]byte, error) { return fs.ReadFile(functionsFS, "functions/"+name) }
