// Package db holds convo's PostgreSQL schema and applies it: the tables
// and their history in numbered goose migrations (schema/), and the current
// definition of every SQL function (functions/), applied after the
// migrations. The queries in queries/ are compiled by sqlc into package
// postgres/dbq. README.md in this directory says where to change what.
package db

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed schema/*.sql
var schemaFS embed.FS

//go:embed functions/*.sql
var functionsFS embed.FS

// FunctionFiles are the files of functions/ in the order Migrate applies
// them: a function of LANGUAGE sql must come after the functions it calls,
// and privileges.sql (who may call what) comes last, after every function
// it names was replaced.
var FunctionFiles = []string{
	"branches.sql", "json.sql", "events.sql", "worker_api.sql", "worker_reads.sql", "batch.sql", "client_api.sql",
	"items.sql", "compaction.sql", "invariants.sql", "search.sql", "privileges.sql",
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
// functions with a transaction advisory lock. A database a newer release
// migrated is left as it is (see Upgrade).
func Migrate(ctx context.Context, dsn string) error {
	_, err := Upgrade(ctx, dsn, Options{Migrate: true})
	return err
}

// Options say what Upgrade may change.
type Options struct {
	// Migrate: apply the migrations this release has and the database
	// lacks, then this release's functions. Without it Upgrade changes
	// nothing (the migrations ran ahead, with --migrate) and refuses a
	// database older than this release.
	Migrate bool
}

// Result says where the database stood against this release and what
// Upgrade did.
type Result struct {
	// Database is the newest migration the database had when Upgrade
	// looked (0: none), Release the newest this release has.
	Database, Release int64
	// Applied are the migrations Upgrade applied, in order.
	Applied []int64
	// Functions: Upgrade applied this release's functions/.
	Functions bool
}

// Newer says the database was migrated by a newer release than this one:
// its schema and functions are that release's, which keep the previous
// release's calls working (docs/deploy.md, "Upgrades").
func (r Result) Newer() bool { return r.Database > r.Release }

// ErrSchemaBehind is what Upgrade returns, without Options.Migrate, for a
// database whose newest migration is older than this release's.
var ErrSchemaBehind = errors.New("the database's schema is older than this release")

// Upgrade is Migrate with the rule that lets two releases serve one
// database side by side (docs/deploy.md, "Upgrades"); the newest migration
// the database holds decides:
//
//   - newer than this release's (a newer release migrated it while this
//     one serves, or this one restarts after): Upgrade changes nothing. Its
//     functions are not applied, which would put this release's older
//     definitions over the newer ones; Result.Newer says so.
//   - this release's, or older: with Options.Migrate, the missing
//     migrations run, then this release's functions are applied. The
//     functions' transaction reads the version again under its lock, so a
//     newer release migrating meanwhile is not overwritten either.
//     Without Options.Migrate nothing changes, and an older database is
//     ErrSchemaBehind, naming both versions.
func Upgrade(ctx context.Context, dsn string, opts Options) (Result, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return Result{}, fmt.Errorf("migrate: parse database url: %w", err)
	}
	sqlDB := stdlib.OpenDB(*cfg)
	defer sqlDB.Close()
	return upgrade(ctx, sqlDB, release{schemaFS, functionsFS, FunctionFiles}, opts)
}

// release is what one release of convo applies: its migrations (schema/)
// and its functions (functions/, in the order of files).
type release struct {
	schema, functions fs.FS
	files             []string
}

func upgrade(ctx context.Context, sqlDB *sql.DB, rel release, opts Options) (Result, error) {
	schema, err := fs.Sub(rel.schema, "schema")
	if err != nil {
		return Result{}, err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return Result{}, err
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, schema,
		goose.WithSessionLocker(locker))
	if err != nil {
		return Result{}, fmt.Errorf("migrate: %w", err)
	}
	var res Result
	if sources := provider.ListSources(); len(sources) > 0 {
		res.Release = sources[len(sources)-1].Version
	}
	// Read without goose's lock: a server of the older release that
	// starts while a newer one migrates must not wait for it to end.
	if res.Database, err = databaseVersion(ctx, sqlDB); err != nil {
		return res, err
	}
	if res.Newer() {
		return res, nil
	}
	if !opts.Migrate {
		if res.Database < res.Release {
			return res, fmt.Errorf("%w: it is at migration %d, this release needs %d; "+
				"run this release with --migrate first (docs/deploy.md, \"Upgrades\")", ErrSchemaBehind, res.Database, res.Release)
		}
		return res, nil
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		res.Applied = append(res.Applied, r.Source.Version)
		slog.Debug("migration applied", "version", r.Source.Version, "duration", r.Duration)
	}
	if res.Functions, err = applyFunctions(ctx, sqlDB, rel, res.Release); err != nil {
		return res, err
	}
	var hasRole bool
	if err := sqlDB.QueryRowContext(ctx, "SELECT to_regrole($1) IS NOT NULL", WorkerRole).Scan(&hasRole); err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	if !hasRole {
		slog.Warn("there is no worker role: this database user may not create roles, so workers must connect as the owner; "+
			"docs/deploy.md (\"The worker role\") has the SQL an administrator runs to create it, and the next start grants it",
			"role", WorkerRole)
	}
	return res, nil
}

// databaseVersion returns the newest migration goose recorded in the
// database at q, 0 when it recorded none (a new database).
func databaseVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int64, error) {
	var v int64
	err := q.QueryRowContext(ctx, "SELECT coalesce(max(version_id), 0) FROM goose_db_version").Scan(&v)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("migrate: read the database's version: %w", err)
	}
	return v, nil
}

// applyFunctions applies rel's functions in one transaction, unless the
// database is by then newer than releaseVersion (a newer release migrated
// it since Upgrade looked): it says whether it applied them.
func applyFunctions(ctx context.Context, sqlDB *sql.DB, rel release, releaseVersion int64) (bool, error) {
	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migrate: functions: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", functionsLock); err != nil {
		return false, fmt.Errorf("migrate: functions: lock: %w", err)
	}
	// A newer release applies its functions under this lock after its
	// migrations committed: read after taking it, the version tells.
	if v, err := databaseVersion(ctx, tx); err != nil || v > releaseVersion {
		return false, err
	}
	for _, name := range rel.files {
		text, err := fs.ReadFile(rel.functions, "functions/"+name)
		if err != nil {
			return false, fmt.Errorf("migrate: functions: %w", err)
		}
		// No arguments: the simple protocol, which runs a file of many
		// statements in one call.
		if _, err := tx.ExecContext(ctx, string(text)); err != nil {
			return false, fmt.Errorf("migrate: functions/%s: %w", name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migrate: functions: %w", err)
	}
	return true, nil
}

// Functions returns the text of functions/name.
func Functions(name string) ([]byte, error) { return fs.ReadFile(functionsFS, "functions/"+name) }
