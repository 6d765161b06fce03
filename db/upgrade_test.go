package db_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/db"
	"github.com/convo-dev/convo/internal/pgtest"
)

// olderFunctions is the functions/ of the older release the tests play:
// one function that only it defines, which shows whether it was applied.
const olderFunctions = `CREATE OR REPLACE FUNCTION convo.older_release() RETURNS int LANGUAGE sql AS 'SELECT 1';`

func newestMigration(t *testing.T, conn *pgx.Conn) int64 {
	t.Helper()
	var v int64
	if err := conn.QueryRow(context.Background(), "SELECT max(version_id) FROM goose_db_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func hasOlderFunction(t *testing.T, conn *pgx.Conn) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), "SELECT to_regproc('convo.older_release') IS NOT NULL").Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestOlderReleaseLeavesANewerDatabase starts an older release (this one's
// migrations but the newest, and functions of its own) on a database this
// release migrated, as an old server restarting in the middle of a
// rolling upgrade does: with or without migrations at start it changes no
// function and no migration, and says the database is newer. The same
// release on a database of its own version applies its functions (what
// the rule prevents does happen without it).
func TestOlderReleaseLeavesANewerDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	conn := connect(t, dsn)
	newest := newestMigration(t, conn)
	before := functionDefs(t, conn)
	for _, opts := range []db.Options{{Migrate: true}, {Migrate: false}} {
		res, err := db.UpgradeAsRelease(ctx, dsn, newest-1, olderFunctions, opts)
		if err != nil {
			t.Fatalf("older release, %+v: %v", opts, err)
		}
		if !res.Newer() || res.Database != newest || res.Release != newest-1 || res.Functions || len(res.Applied) != 0 {
			t.Errorf("older release, %+v: %+v; want the database newer (%d > %d), nothing applied", opts, res, newest, newest-1)
		}
		if hasOlderFunction(t, conn) {
			t.Fatalf("older release, %+v: its functions were applied over the newer release's", opts)
		}
		if after := functionDefs(t, conn); !maps.Equal(before, after) {
			t.Errorf("older release, %+v: the functions changed", opts)
		}
		if v := newestMigration(t, conn); v != newest {
			t.Errorf("older release, %+v: the database is at migration %d, was %d", opts, v, newest)
		}
	}

	res, err := db.UpgradeAsRelease(ctx, dsn, newest, olderFunctions, db.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Newer() || !res.Functions || !hasOlderFunction(t, conn) {
		t.Errorf("a release of the database's own version: %+v; want its functions applied", res)
	}
}

// TestMigrationsOffRefusesAnOlderDatabase starts this release without
// migrations on a database one migration behind: it is refused with
// ErrSchemaBehind, naming both versions and --migrate, and changes
// nothing. On a database of its own version it starts and applies no
// function either (--migrate did).
func TestMigrationsOffRefusesAnOlderDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	conn := connect(t, dsn)
	newest := newestMigration(t, conn)

	res, err := db.UpgradeAsRelease(ctx, dsn, newest, olderFunctions, db.Options{Migrate: false})
	if err != nil || res.Functions || hasOlderFunction(t, conn) {
		t.Fatalf("migrations off, same version: %+v, %v; want a start that applies nothing", res, err)
	}

	if _, err := conn.Exec(ctx, "DELETE FROM goose_db_version WHERE version_id = $1", newest); err != nil {
		t.Fatal(err)
	}
	res, err = db.UpgradeAsRelease(ctx, dsn, newest, olderFunctions, db.Options{Migrate: false})
	if !errors.Is(err, db.ErrSchemaBehind) {
		t.Fatalf("migrations off, the database behind: %+v, %v; want ErrSchemaBehind", res, err)
	}
	for _, want := range []string{fmt.Sprintf("at migration %d", newest-1), fmt.Sprintf("needs %d", newest), "--migrate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if hasOlderFunction(t, conn) || newestMigration(t, conn) != newest-1 {
		t.Error("a refused start changed the database")
	}
}

// TestPreviousReleasesSendMessagesIsDropped puts back the six-argument
// convo.send_messages, as a server of the previous release does when it
// restarts after this release migrated (it re-applies its functions):
// the previous release's calls become ambiguous. The next Migrate of this
// release (compat.sql) drops it, and the same calls work again.
func TestPreviousReleasesSendMessagesIsDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	conn := connect(t, dsn)
	if _, err := conn.Exec(ctx, `CREATE FUNCTION convo.send_messages(p_owner_ids text[], p_conversation_ids uuid[], p_texts text[],
		p_model_configs text[], p_parent_message_ids uuid[], p_file_ids text[])
		RETURNS TABLE (ord integer, conversation_id uuid, user_message_id uuid, assistant_message_ids uuid[],
		               prompt_ids uuid[], comparison_id uuid, error_code text, error_message text, error_detail text)
		LANGUAGE plpgsql AS $$ BEGIN RETURN; END $$`); err != nil {
		t.Fatal(err)
	}
	const previousCall = `SELECT count(*) FROM convo.send_messages('{}'::text[], '{}'::uuid[], '{}'::text[], '{}'::text[], '{}'::uuid[], '{}'::text[])`
	var n int
	if err := conn.QueryRow(ctx, previousCall).Scan(&n); err == nil || !strings.Contains(err.Error(), "is not unique") {
		t.Fatalf("the previous release's call beside its own overload: %v; want it ambiguous", err)
	}
	if err := db.Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, previousCall).Scan(&n); err != nil {
		t.Errorf("the previous release's call after Migrate: %v", err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_proc WHERE oid::regprocedure::text LIKE 'convo.send_messages(%'").Scan(&n); err != nil || n != 1 {
		t.Errorf("convo.send_messages has %d signatures after Migrate (%v); want 1", n, err)
	}
}

// TestUpgradeBeginsAgainAfterALock: an upgrade whose tables are held by a
// transaction of a server still serving (here a reader holding
// convo.messages for longer than the lock timeout) tries to take them
// again and again, and is applied once the reader ends; it does not fail,
// and it does not wait behind the reader for ever. Meanwhile each try is
// cut short, so that the serving transactions queued behind it (reads of
// convo.conversations, which each try takes first) never wait as long as
// deadlock_timeout: none of them can be a deadlock's victim.
func TestUpgradeBeginsAgainAfterALock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	reader, err := connect(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Exec(ctx, "SELECT count(*) FROM convo.messages"); err != nil {
		t.Fatal(err)
	}
	// The reader's connection is used by this goroutine alone until it
	// ends (rolledBack), and closed by the test's cleanup after.
	rolledBack := make(chan struct{})
	var releasing atomic.Int64 // when the reader began to end (UnixNano)
	go func() {
		defer close(rolledBack)
		time.Sleep(db.UpgradeLockTimeout + time.Second)
		releasing.Store(time.Now().UnixNano())
		reader.Rollback(ctx) //nolint:errcheck
	}()
	// A serving transaction's reads while the upgrade tries (those that
	// ended before the reader began to end: after it, the upgrade holds
	// the tables until it commits): the longest.
	serving := connect(t, dsn)
	upgraded := make(chan struct{})
	longest := make(chan time.Duration, 1)
	go func() {
		var most time.Duration
		defer func() { longest <- most }()
		for {
			select {
			case <-upgraded:
				return
			default:
			}
			began := time.Now()
			if _, err := serving.Exec(ctx, "SELECT count(*) FROM convo.conversations"); err != nil {
				t.Errorf("a serving read: %v", err)
				return
			}
			if r := releasing.Load(); r == 0 || time.Now().UnixNano() < r {
				most = max(most, time.Since(began))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	began := time.Now()
	res, err := db.UpgradeWithMigration(ctx, dsn, "99990_lock_test.sql", "ALTER TABLE convo.messages ADD COLUMN lock_test integer;")
	close(upgraded)
	<-rolledBack
	if most := <-longest; most >= time.Second {
		t.Errorf("a serving read waited %v behind the upgrade's tries; want less than deadlock_timeout (1 s)", most)
	}
	if err != nil {
		t.Fatalf("the upgrade failed: %v", err)
	}
	if took := time.Since(began); took < db.UpgradeLockTimeout {
		t.Errorf("the upgrade took %v, less than the lock timeout, while a reader held the table: it did not wait", took)
	}
	if len(res.Applied) != 1 || res.Applied[0] != 99990 {
		t.Errorf("applied %v, want [99990]", res.Applied)
	}
	var has bool
	if err := connect(t, dsn).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = 'convo' AND table_name = 'messages' AND column_name = 'lock_test')`).Scan(&has); err != nil || !has {
		t.Errorf("the migration's column is missing (%v)", err)
	}
}
