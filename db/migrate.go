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
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"time"

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
// them: a function of LANGUAGE sql must come after the functions it calls
// (its body is checked when it is created; a plpgsql body only when it
// runs), compat.sql (what keeps the previous release's calls working)
// after the functions it delegates to, and privileges.sql (who may call
// what) comes last, after every function it names was replaced. The SQL
// worker API is the worker_*.sql files and the client API the
// client_*.sql files, one topic each (db/README.md): the worker's prompts
// first (the helpers that end a prompt, which every other writer calls),
// then its claims, blocks, tool calls and pauses.
var FunctionFiles = []string{
	"branches.sql", "json.sql", "events.sql",
	"worker_prompts.sql", "worker_claims.sql", "worker_blocks.sql", "worker_tool_calls.sql", "worker_pauses.sql",
	"worker_reads.sql", "batch.sql",
	"client_conversations.sql", "client_members.sql", "client_messages.sql", "client_replies.sql", "client_feedback.sql",
	"client_inputs.sql", "client_shares.sql",
	"items.sql", "compaction.sql", "invariants.sql", "search.sql", "restore.sql", "compat.sql", "privileges.sql",
}

// WorkerRole is the group role that may only call the SQL worker API
// (docs/deploy.md, "The worker role"): the migrations create it when the
// user that migrates may create roles, and Migrate grants it the worker
// functions on every start. A worker's login is a member of it.
const WorkerRole = "convo_worker"

// functionsLock is the advisory lock key that serialises the application
// of functions/ by servers starting at once (two concurrent CREATE OR
// REPLACE of one function fail with "tuple concurrently updated"); they
// also hold goose's session lock, which older releases took for their
// migrations only.
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
//     migrations and then this release's functions are applied in one
//     transaction, so that the servers still serving see the schema and
//     functions change at once. It reads the versions again under the
//     locks, so a newer release migrating meanwhile is not overwritten
//     either.
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
	// goose creates its table of versions in a new database (under its
	// lock); the migrations themselves run below.
	if _, err := provider.GetDBVersion(ctx); err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	if res, err = migrateRetrying(ctx, sqlDB, locker, provider.ListSources(), schema, rel, res); err != nil || res.Newer() {
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

// The upgrade transaction's patience with the locks its migrations take
// on tables the previous release's servers are using (upgradeLockTimeout
// per lock), and how many times it starts again after a deadlock with
// one of their transactions or a lock it did not get in time.
const (
	upgradeLockTimeout = 5 * time.Second
	upgradeAttempts    = 5
)

// migrateRetrying is migrateAtOnce, begun again (after a short wait) when
// it failed for a lock: its tables not taken (lockTablesFor), a lock not
// granted within upgradeLockTimeout, or a deadlock with a serving
// transaction all the same. Its transaction rolled back, so nothing was
// half applied.
func migrateRetrying(ctx context.Context, sqlDB *sql.DB, locker lock.SessionLocker, sources []*goose.Source,
	schema fs.FS, rel release, res Result) (Result, error) {
	for attempt := 1; ; attempt++ {
		out, err := migrateAtOnce(ctx, sqlDB, locker, sources, schema, rel, res)
		var pgErr *pgconn.PgError
		busy := errors.Is(err, errTablesBusy) ||
			(errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "55P03")) // deadlock_detected, lock_not_available
		if err == nil || attempt == upgradeAttempts || !busy {
			return out, err
		}
		wait := time.Duration(attempt) * 200 * time.Millisecond
		slog.Warn("migrate: a lock the migrations need is held by the servers still serving: beginning again",
			"attempt", attempt, "of", upgradeAttempts, "err", err, "wait", wait)
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(wait):
		}
	}
}

// migrateAtOnce applies, under goose's session lock and in one
// transaction, the migrations of sources the database lacks (recording
// each in goose's table, as goose does), then rel's functions. In one
// transaction, because servers of the previous release keep serving
// meanwhile: a migration that drops a function whose new definition is in
// functions/ (a changed signature) would otherwise leave it missing until
// the functions commit, and their calls failing. res holds the versions
// read before; it comes back with what was applied, or Newer when a newer
// release migrated the database while this one waited for the lock.
func migrateAtOnce(ctx context.Context, sqlDB *sql.DB, locker lock.SessionLocker, sources []*goose.Source,
	schema fs.FS, rel release, res Result) (_ Result, err error) {
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	if err := locker.SessionLock(ctx, conn); err != nil {
		return res, fmt.Errorf("migrate: lock: %w", err)
	}
	defer func() {
		if unlockErr := locker.SessionUnlock(context.WithoutCancel(ctx), conn); unlockErr != nil && err == nil {
			err = fmt.Errorf("migrate: unlock: %w", unlockErr)
		}
	}()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	// A lock request waiting behind a long transaction would hold up
	// every request queued behind it: give up instead (migrateRetrying).
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", upgradeLockTimeout.Milliseconds())); err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	// A server applying functions without migrations (another of this
	// release) takes this lock too.
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", functionsLock); err != nil {
		return res, fmt.Errorf("migrate: functions: lock: %w", err)
	}
	applied := map[int64]bool{}
	rows, err := tx.QueryContext(ctx, "SELECT version_id FROM goose_db_version WHERE is_applied")
	if err != nil {
		return res, fmt.Errorf("migrate: read the database's migrations: %w", err)
	}
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return res, fmt.Errorf("migrate: read the database's migrations: %w", err)
		}
		applied[v] = true
		res.Database = max(res.Database, v)
	}
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("migrate: read the database's migrations: %w", err)
	}
	if res.Newer() {
		return res, nil
	}
	if err := lockTablesFor(ctx, tx, sources, applied); err != nil {
		return res, err
	}
	for _, src := range sources {
		if applied[src.Version] {
			continue
		}
		if src.Version < res.Database {
			return res, fmt.Errorf("migrate: migration %d is missing from the database, which has %d: "+
				"migrations apply in order, and none may be added below one applied", src.Version, res.Database)
		}
		text, err := fs.ReadFile(schema, src.Path)
		if err != nil {
			return res, fmt.Errorf("migrate: %w", err)
		}
		up, err := upSection(string(text))
		if err != nil {
			return res, fmt.Errorf("migrate: %s: %w", src.Path, err)
		}
		start := time.Now()
		// No arguments: the simple protocol, which runs many statements
		// in one call.
		if _, err := tx.ExecContext(ctx, up); err != nil {
			return res, fmt.Errorf("migrate: %s: %w", src.Path, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)", src.Version); err != nil {
			return res, fmt.Errorf("migrate: record %s: %w", src.Path, err)
		}
		res.Applied = append(res.Applied, src.Version)
		slog.Debug("migration applied", "version", src.Version, "duration", time.Since(start))
	}
	if err := execFunctions(ctx, tx, rel); err != nil {
		return res, err
	}
	if err := tx.Commit(); err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	res.Functions = true
	return res, nil
}

// lockTablesAttempts is how many times, at most, one upgrade transaction
// tries to take its tables (lockTablesFor), each try bounded by half of
// PostgreSQL's deadlock_timeout, with lockTablesPause between tries.
const (
	lockTablesAttempts = 20
	lockTablesPause    = 100 * time.Millisecond
)

// errTablesBusy is lockTablesFor's error when its tries did not take the
// tables: migrateRetrying begins the upgrade again.
var errTablesBusy = errors.New("the tables stayed busy")

// lockTablesFor takes every table of schema convo in ACCESS EXCLUSIVE
// mode, in one statement, before the migrations of sources the database
// lacks (applied: those it has) run; nothing when it lacks none.
//
// The migrations' ALTER TABLEs would otherwise take their tables' locks
// one by one, between statements, while the servers still serving take
// theirs in their own order: a server's transaction that holds one table
// and waits for one the upgrade holds, while the upgrade goes on to wait
// for the first, is a deadlock, and PostgreSQL aborts the transaction of
// the cycle that waited first, after deadlock_timeout: often the
// server's (a send failed, in TestRollingUpgrade under load). The LOCK
// takes its tables one by one too, so it could close such a cycle as
// well; it is therefore cut off (statement_timeout) at half of
// deadlock_timeout: no serving transaction waits for it long enough to
// look for a deadlock. A try cut off, or refused, rolls back to its
// savepoint (giving back what it took) and the next begins after a
// pause. Once the LOCK holds every table, the upgrade waits for nothing
// a serving transaction holds, so it closes no cycle; the serving
// transactions wait for its commit instead, as they already did for the
// tables it altered.
func lockTablesFor(ctx context.Context, tx *sql.Tx, sources []*goose.Source, applied map[int64]bool) error {
	pending := false
	for _, src := range sources {
		pending = pending || !applied[src.Version]
	}
	if !pending {
		return nil
	}
	var tables, statementTimeout string
	var tryMillis int64
	// convo.conversations first: a serving transaction locks its
	// conversation before most of the rest.
	err := tx.QueryRowContext(ctx, `SELECT coalesce(string_agg(format('%I.%I', schemaname, tablename), ', '
	                                         ORDER BY tablename <> 'conversations', tablename), ''),
	                                       current_setting('statement_timeout'),
	                                       greatest(extract(epoch FROM current_setting('deadlock_timeout')::interval) * 500, 1)::bigint
	                                  FROM pg_tables WHERE schemaname = 'convo'`).Scan(&tables, &statementTimeout, &tryMillis)
	if err != nil {
		return fmt.Errorf("migrate: list the tables to lock: %w", err)
	}
	if tables == "" {
		return nil // a new database: nothing is serving on it
	}
	for attempt := 1; ; attempt++ {
		err := lockTablesOnce(ctx, tx, tables, tryMillis, statementTimeout)
		var pgErr *pgconn.PgError
		if err == nil || attempt == lockTablesAttempts || !errors.As(err, &pgErr) ||
			(pgErr.Code != "57014" && pgErr.Code != "55P03" && pgErr.Code != "40P01") { // query_canceled, lock_not_available, deadlock_detected
			if err != nil {
				return fmt.Errorf("migrate: lock the tables (%d tries of %d ms): %w: %w", attempt, tryMillis, errTablesBusy, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(lockTablesPause):
		}
	}
}

// lockTablesOnce is one try of lockTablesFor: the LOCK under a savepoint,
// within tryMillis; a failed try leaves tx as it was.
func lockTablesOnce(ctx context.Context, tx *sql.Tx, tables string, tryMillis int64, statementTimeout string) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT lock_tables"); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d; LOCK TABLE %s IN ACCESS EXCLUSIVE MODE", tryMillis, tables))
	if err != nil {
		if _, rbErr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT lock_tables"); rbErr != nil {
			return errors.Join(err, rbErr)
		}
		return err
	}
	if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT lock_tables"); err != nil {
		return err
	}
	// A setting made under a savepoint stays set after its release: the
	// migrations run under the transaction's statement_timeout again.
	_, err = tx.ExecContext(ctx, "SELECT set_config('statement_timeout', $1, true)", statementTimeout)
	return err
}

// upSection returns the statements of a goose migration's Up section: the
// text between "-- +goose Up" and "-- +goose Down" (StatementBegin and
// StatementEnd are comments to PostgreSQL). A migration that must run
// outside a transaction (NO TRANSACTION) cannot be one of them.
func upSection(text string) (string, error) {
	_, up, ok := strings.Cut(text, "-- +goose Up")
	if !ok {
		return "", errors.New("no \"-- +goose Up\" line")
	}
	if strings.Contains(text, "+goose NO TRANSACTION") {
		return "", errors.New("NO TRANSACTION is not supported: every migration runs in the one transaction of the upgrade")
	}
	up, _, _ = strings.Cut(up, "-- +goose Down")
	return up, nil
}

// execFunctions applies rel's functions in tx, in the order of its files.
func execFunctions(ctx context.Context, tx *sql.Tx, rel release) error {
	for _, name := range rel.files {
		text, err := fs.ReadFile(rel.functions, "functions/"+name)
		if err != nil {
			return fmt.Errorf("migrate: functions: %w", err)
		}
		// No arguments: the simple protocol, which runs a file of many
		// statements in one call.
		if _, err := tx.ExecContext(ctx, string(text)); err != nil {
			return fmt.Errorf("migrate: functions/%s: %w", name, err)
		}
	}
	return nil
}

// Functions returns the text of functions/name.
func Functions(name string) ([]byte, error) { return fs.ReadFile(functionsFS, "functions/"+name) }
