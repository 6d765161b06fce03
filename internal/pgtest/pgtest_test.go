package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func count(t testing.TB, dsn, sql string, args ...any) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestDSNGivesEachTestItsOwnDatabase(t *testing.T) {
	t.Parallel()
	exec := func(t *testing.T, dsn, sql string) {
		t.Helper()
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	hasTable := func(t *testing.T, dsn, table string) bool {
		return count(t, dsn, "SELECT count(*) FROM pg_tables WHERE tablename = $1", table) == 1
	}
	// The second test runs while the first one's database still exists.
	t.Run("First", func(t *testing.T) {
		first := DSN(t)
		exec(t, first, "CREATE TABLE first_only (n int)")
		t.Run("Second", func(t *testing.T) {
			second := DSN(t)
			if second == first {
				t.Fatalf("both tests got %s", first)
			}
			if hasTable(t, second, "first_only") {
				t.Error("a table created by the first test shows in the second test's database")
			}
			exec(t, second, "CREATE TABLE second_only (n int)")
		})
		if hasTable(t, first, "second_only") {
			t.Error("a table created by the second test shows in the first test's database")
		}
		if !hasTable(t, first, "first_only") {
			t.Error("the first test lost its table")
		}
	})
}

func TestDSNInParallelTests(t *testing.T) {
	t.Parallel()
	const tests = 8
	var (
		mu    sync.Mutex
		names []string
	)
	t.Run("Group", func(t *testing.T) {
		for i := range tests {
			table := fmt.Sprintf("only_%d", i)
			t.Run(table, func(t *testing.T) {
				t.Parallel()
				pool := Pool(t)
				ctx := t.Context()
				var name string
				if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				names = append(names, name)
				mu.Unlock()
				if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (n int)"); err != nil {
					t.Fatal(err)
				}
				rows, _ := pool.Query(ctx, "SELECT tablename FROM pg_tables WHERE tablename LIKE 'only\\_%'")
				tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil {
					t.Fatal(err)
				}
				if len(tables) != 1 || tables[0] != table {
					t.Errorf("database %s holds tables %v, want only %s", name, tables, table)
				}
			})
		}
	})

	if len(names) != tests {
		t.Fatalf("got %d databases, want %d", len(names), tests)
	}
	slices.Sort(names)
	if len(slices.Compact(slices.Clone(names))) != tests {
		t.Errorf("databases handed out more than once: %v", names)
	}
	srv := server(t)
	if n := count(t, srv.adminDSN, "SELECT count(*) FROM pg_database WHERE datname = ANY($1)", names); n != 0 {
		t.Errorf("%d of the tests' databases still exist after the tests ended", n)
	}
}

// TestConcurrentClones clones the template from many goroutines at once,
// more than -parallel lets tests do.
func TestConcurrentClones(t *testing.T) {
	t.Parallel()
	srv := server(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range cap(errs) {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			name, _, err := srv.createDatabase(ctx)
			if err == nil {
				err = srv.dropDatabase(ctx, name)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestDSNAppliesTheMigrations(t *testing.T) {
	t.Parallel()
	dsn := DSN(t)
	if n := count(t, dsn, "SELECT count(*) FROM goose_db_version WHERE version_id > 0 AND is_applied"); n == 0 {
		t.Fatal("no migration recorded in goose_db_version")
	}
	srv := server(t)
	if n := count(t, srv.adminDSN,
		"SELECT count(*) FROM pg_database WHERE datname = $1 AND datistemplate AND NOT datallowconn",
		srv.template); n != 1 {
		t.Errorf("template %s is not sealed (datistemplate, not datallowconn)", srv.template)
	}
}

// TestCluster restarts the server, so it does not run in parallel with the
// other tests.
func TestCluster(t *testing.T) {
	c := Cluster(t)
	dsn := DSN(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if n := count(t, dsn, "SELECT count(*) FROM kept"); n != 1 {
		t.Errorf("rows after restart = %d, want 1", n)
	}
	// Clones still work after the outage.
	if n := count(t, DSN(t), "SELECT 1"); n != 1 {
		t.Error("new database after restart does not answer")
	}
}

// TestExternalServer runs this package's tests again in a child process
// pointed at this process's cluster through CONVO_TEST_DATABASE_URL.
func TestExternalServer(t *testing.T) {
	t.Parallel()
	if os.Getenv(EnvDatabaseURL) != "" {
		t.Skip("already running against " + EnvDatabaseURL)
	}
	srv := server(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(srv.adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	quote := func(v string) string {
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
	}
	// A keyword/value connection string, to exercise that form too.
	kv := fmt.Sprintf("host=%s port=%d user=%s password=%s dbname=%s sslmode=disable",
		quote(cfg.Host), cfg.Port, quote(cfg.User), quote(cfg.Password), quote(cfg.Database))

	cmd := exec.CommandContext(t.Context(), exe, "-test.v", "-test.count=1",
		"-test.run=^(TestDSNGivesEachTestItsOwnDatabase|TestDSNInParallelTests|TestDSNAppliesTheMigrations|TestCluster)$")
	cmd.Env = append(os.Environ(), EnvDatabaseURL+"="+kv)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child tests failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		"--- PASS: TestDSNGivesEachTestItsOwnDatabase",
		"--- PASS: TestDSNInParallelTests",
		"--- PASS: TestDSNAppliesTheMigrations",
		"--- SKIP: TestCluster",
		"the tests use " + EnvDatabaseURL + " instead",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
	if n := count(t, srv.adminDSN, "SELECT count(*) FROM pg_database WHERE datname LIKE 'convo\\_tpl\\_%' AND datname <> $1",
		srv.template); n != 0 {
		t.Errorf("the child left %d template databases behind", n)
	}
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:p@h:5432/postgres?sslmode=disable": "postgres://u:p@h:5432/t_1?sslmode=disable",
		"postgresql://h/":                  "postgresql://h/t_1",
		"host=h port=5432 dbname=postgres": "host=h port=5432 dbname=postgres dbname=t_1",
	} {
		got, err := withDatabase(in, "t_1")
		if err != nil || got != want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
