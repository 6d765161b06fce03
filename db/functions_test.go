package db_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/db"
	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var createFunctionRE = regexp.MustCompile(`CREATE OR REPLACE FUNCTION convo\.(\w+)\(`)

// definedFunctions returns the functions db/functions defines, each with
// its file, failing for one defined twice.
func definedFunctions(t *testing.T) map[string]string {
	t.Helper()
	defined := map[string]string{}
	for _, name := range db.FunctionFiles {
		text, err := db.Functions(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range createFunctionRE.FindAllStringSubmatch(string(text), -1) {
			if prev, ok := defined[m[1]]; ok {
				t.Errorf("convo.%s is defined in %s and again in %s", m[1], prev, name)
			}
			defined[m[1]] = name
		}
	}
	return defined
}

// TestEveryFunctionIsInFunctions checks that db/functions is where every
// function is: each function of the schema convo after Migrate is defined
// there (none only by a migration), once, with one signature, and each
// file there is applied.
func TestEveryFunctionIsInFunctions(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("functions/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.Contains(db.FunctionFiles, filepath.Base(f)) {
			t.Errorf("%s is not in db.FunctionFiles: Migrate would not apply it", f)
		}
	}
	defined := definedFunctions(t)
	ctx := context.Background()
	conn := connect(t, pgtest.DSN(t))
	rows, err := conn.Query(ctx, `SELECT proname, count(*) FROM pg_proc
		WHERE pronamespace = 'convo'::regnamespace GROUP BY proname ORDER BY proname`)
	if err != nil {
		t.Fatal(err)
	}
	inDB := map[string]bool{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		inDB[name] = true
		if n != 1 {
			t.Errorf("convo.%s has %d signatures; an old one a migration left must be dropped by a migration", name, n)
		}
		if defined[name] == "" {
			t.Errorf("convo.%s exists after Migrate but db/functions does not define it", name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for name, file := range defined {
		if !inDB[name] {
			t.Errorf("%s defines convo.%s, which Migrate did not create", file, name)
		}
	}
}

// TestReadmeNamesEveryFunctionFile checks that db/README.md's table of
// functions/ by topic has a row for every file Migrate applies, so that a
// reader finds a function by its topic.
func TestReadmeNamesEveryFunctionFile(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "## functions/, by topic")
	if !ok {
		t.Fatal(`db/README.md has no section "## functions/, by topic"`)
	}
	// The table: from its first row to the first blank line.
	table = table[strings.Index(table, "\n|")+1:]
	table, _, _ = strings.Cut(table, "\n\n")
	for _, name := range db.FunctionFiles {
		if !regexp.MustCompile("(?m)^\\| [^|]*`" + regexp.QuoteMeta(name) + "`").MatchString(table) {
			t.Errorf("db/README.md's table of functions/ by topic has no row naming %s", name)
		}
	}
}

// TestMigrateAgain checks that Migrate can run again, and from several
// servers at once, and leaves every function as it was.
func TestMigrateAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	conn := connect(t, dsn)
	before := functionDefs(t, conn)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- db.Migrate(ctx, dsn) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Migrate, again, four at once: %v", err)
		}
	}
	if after := functionDefs(t, conn); !maps.Equal(before, after) {
		t.Error("the functions changed when Migrate ran again")
	}
}

// TestSQLStates checks the one table of SQLSTATEs: every CV state the
// functions raise is in package sqlstate and in docs/events.md, and every
// state there is raised.
func TestSQLStates(t *testing.T) {
	t.Parallel()
	raised := map[string]bool{}
	re := regexp.MustCompile(`ERRCODE = '(CV\d{3})'`)
	for _, name := range db.FunctionFiles {
		text, err := db.Functions(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(text), -1) {
			raised[m[1]] = true
		}
	}
	doc, err := os.ReadFile("../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	for state := range raised {
		if !slices.Contains(sqlstate.All, state) {
			t.Errorf("db/functions raises %s, which package sqlstate lacks", state)
		}
	}
	for _, state := range sqlstate.All {
		if !raised[state] {
			t.Errorf("package sqlstate names %s, which no function raises", state)
		}
		if !strings.Contains(string(doc), "| `"+state+"` |") {
			t.Errorf("docs/events.md's table of SQLSTATEs has no row for %s", state)
		}
	}
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// functionDefs returns pg_get_functiondef of every function of convo.
func functionDefs(t *testing.T, conn *pgx.Conn) map[string]string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid)
		FROM pg_proc p WHERE p.pronamespace = 'convo'::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var kv [2]string
		err := r.Scan(&kv[0], &kv[1])
		return kv, err
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range defs {
		out[kv[0]] = kv[1]
	}
	return out
}
