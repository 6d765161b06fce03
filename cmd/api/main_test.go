package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/internal/testbin"
	"github.com/convo-dev/convo/internal/testwait"
)

// TestEmbeddedDefault runs the production wiring with nothing configured
// but a data directory and free ports: it must start its own PostgreSQL,
// migrate it, serve /healthz, and stop it on Close.
func TestEmbeddedDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir := filepath.Join(tempDirFor(t, "postgres"), "pgdata")

	m := NewMain()
	m.Stdout = io.Discard
	env := map[string]string{"CONVO_HTTP_ADDR": "127.0.0.1:0", "CONVO_DATA_DIR": dataDir, "CONVO_EMBED_PORT": "0", "CONVO_LOG_LEVEL": "warn"}
	if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		m.Close()
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			m.Close()
		}
	})

	expectHealth(t, m.URL(), http.StatusOK)

	// The logged connection string works, and the schema is migrated.
	dsn := m.cluster.DSN("convo")
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect with the logged database url: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM convo.conversations`).Scan(&n); err != nil {
		t.Fatalf("schema not migrated: %v", err)
	}

	// The in-process worker runs as the worker login, whose password is
	// the data directory's, for its owner only, and writes a whole reply.
	if user := m.workerPool.Config().ConnConfig.User; user != workerLoginRole {
		t.Errorf("the in-process worker connects as %q, want %q", user, workerLoginRole)
	}
	if info, err := os.Stat(filepath.Join(dataDir, workerPasswordFile)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the worker's password file: %v, %v; want mode 0600", info, err)
	}
	var promptID string
	if err := conn.QueryRow(ctx, `SELECT prompt_ids[1]::text FROM convo.send_message('local', NULL, 'Hello', '[{"provider": "demo"}]')`).
		Scan(&promptID); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the in-process worker completes the reply", func() bool {
		var status string
		return conn.QueryRow(ctx, `SELECT status FROM convo.prompts WHERE id = $1`, promptID).Scan(&status) == nil && status == "completed"
	})
	conn.Close(ctx)

	pid := postmasterPID(t, dataDir)
	if err := m.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	closed = true
	if processAlive(pid) {
		t.Errorf("postgres (pid %d) still running after Close", pid)
	}
}

// TestEmbeddedDefaultAsProcess builds the server and runs it as a process,
// as the postgres user when the test runs as root (so it exercises the
// path that needs no user switch) and as the current user otherwise. It
// must print a usable connection string, serve /healthz, and on SIGTERM
// exit 0 and stop its PostgreSQL.
func TestEmbeddedDefaultAsProcess(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t, apiPkg)
	home := tempDirFor(t, "postgres")
	cmd := exec.Command(bin, "--http-addr", "127.0.0.1:0", "--embed-port", "0")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, "cache"), "DATABASE_URL=")
	if os.Geteuid() == 0 {
		uid, gid := lookupUser(t, "postgres")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck

	urlRE := regexp.MustCompile(`msg="convo is serving" url="?([^"\s]+)`)
	dsnRE := regexp.MustCompile(`admin_database_url="?([^"\s]+)`)
	workerRE := regexp.MustCompile(`worker_database_url="?([^"\s]+)`)
	var baseURL, dsn, workerDSN string
	var logs strings.Builder
	scanner := bufio.NewScanner(stderr)
	deadline := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() }) //nolint:errcheck
	for baseURL == "" && scanner.Scan() {
		line := scanner.Text()
		logs.WriteString(line + "\n")
		if m := dsnRE.FindStringSubmatch(line); m != nil {
			dsn = m[1]
		}
		if m := workerRE.FindStringSubmatch(line); m != nil {
			workerDSN = m[1]
		}
		if m := urlRE.FindStringSubmatch(line); m != nil {
			baseURL = m[1]
		}
	}
	deadline.Stop()
	go io.Copy(io.Discard, stderr) //nolint:errcheck
	if baseURL == "" || dsn == "" || workerDSN == "" {
		t.Fatalf("server did not log its url and database urls:\n%s", logs.String())
	}

	expectHealth(t, baseURL, http.StatusOK)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect with the logged admin url %s: %v", dsn, err)
	}
	if _, err := conn.Exec(ctx, `SELECT count(*) FROM convo.messages`); err != nil {
		t.Fatalf("the admin url reads the tables: %v", err)
	}
	conn.Close(ctx)
	// The workers' URL is a login of the worker role: the worker API,
	// and no table.
	if !strings.HasPrefix(workerDSN, "postgres://"+workerLoginRole+":") {
		t.Errorf("the worker url %s is not the worker login's", workerDSN)
	}
	wconn, err := pgx.Connect(ctx, workerDSN)
	if err != nil {
		t.Fatalf("connect with the logged worker url %s: %v", workerDSN, err)
	}
	if _, err := wconn.Exec(ctx, `SELECT convo.expire_leases()`); err != nil {
		t.Errorf("worker API, on the worker url: %v", err)
	}
	if _, err := wconn.Exec(ctx, `SELECT count(*) FROM convo.messages`); err == nil {
		t.Error("the worker url reads convo.messages")
	}
	wconn.Close(ctx)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("server exited with %v after SIGTERM; logs:\n%s", err, logs.String())
	}
	// Its PostgreSQL is gone too.
	if c, err := pgx.Connect(ctx, dsn); err == nil {
		c.Close(ctx)
		t.Error("embedded PostgreSQL still answers after the server exited")
	}
}

func expectHealth(t *testing.T, baseURL string, want int) {
	t.Helper()
	resp, err := http.Get(baseURL + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("GET /healthz = %d, want %d", resp.StatusCode, want)
	}
}

// tempDirFor returns a temporary directory that owner can use too (when
// the test runs as root, PostgreSQL runs as that user).
func tempDirFor(t *testing.T, owner string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "convo-api-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		uid, gid := lookupUser(t, owner)
		if err := os.Chown(dir, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func lookupUser(t *testing.T, name string) (uint32, uint32) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("user %s: %v", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uint32(uid), uint32(gid)
}

func postmasterPID(t *testing.T, dataDir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return p.Signal(syscall.Signal(0)) == nil
}
