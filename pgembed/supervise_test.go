//go:build unix

package pgembed

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/convo-dev/convo/internal/testwait"
)

// logBuffer collects a logger's lines for a test to read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// count returns how many lines have msg as their message.
func (b *logBuffer) count(msg string) int { return strings.Count(b.String(), `msg="`+msg+`"`) }

func TestSupervise(t *testing.T) {
	t.Parallel()
	type testBundle struct {
		c    *Cluster
		logs *logBuffer
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		logs := &logBuffer{}
		c := startCluster(t, Options{DataDir: filepath.Join(testDir(t), "data"), Fast: true, Supervise: true,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		return &testBundle{c: c, logs: logs}
	}
	// kill kills the postmaster as the OOM killer would, and returns its PID.
	kill := func(t *testing.T, c *Cluster) int {
		t.Helper()
		pid := c.pid()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	// back waits until a postmaster other than old answers queries.
	back := func(t *testing.T, b *testBundle, old int) {
		t.Helper()
		testwait.For(t, "embedded PostgreSQL is back", func() bool { return b.logs.count("embedded PostgreSQL is back") > 0 })
		if b.c.pid() == old {
			t.Fatalf("the killed postmaster %d is still the cluster's", old)
		}
		conn := connect(t, b.c.DSN("postgres"))
		if got := queryString(t, conn, "SHOW data_directory"); got != b.c.DataDir() {
			t.Fatalf("DSN reaches %s, want %s", got, b.c.DataDir())
		}
	}

	t.Run("KilledIsStartedAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		port := b.c.Port()
		conn := connect(t, b.c.DSN("postgres"))
		// A synchronous commit writes the WAL out even with fsync off.
		if _, err := conn.Exec(ctx, "SET synchronous_commit = on; CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		old := kill(t, b.c)
		back(t, b, old)
		if b.c.Port() != port {
			t.Errorf("port %d after the restart, want %d", b.c.Port(), port)
		}
		after := connect(t, b.c.DSN("postgres"))
		if got := queryString(t, after, "SELECT string_agg(n::text, ',') FROM kept"); got != "1" {
			t.Errorf("rows after the restart: %q, want 1", got)
		}
		logs := b.logs.String()
		for _, want := range []string{
			`level=ERROR msg="embedded PostgreSQL exited" pid=` + strconv.Itoa(old) + ` status="signal: killed"`,
			`level=WARN msg="restarting embedded PostgreSQL" attempt=1 backoff=100ms`,
			`level=INFO msg="embedded PostgreSQL is back" pid=` + strconv.Itoa(b.c.pid()) + ` attempts=1 took=`,
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("no %s in the log:\n%s", want, logs)
			}
		}

		// And again: the supervisor watches the new postmaster too.
		old = kill(t, b.c)
		testwait.For(t, "the second restart", func() bool { return b.logs.count("embedded PostgreSQL is back") == 2 })
		if b.c.pid() == old {
			t.Fatalf("the killed postmaster %d is still the cluster's", old)
		}
	})

	t.Run("StopIsNotRestarted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pid := b.c.pid()
		if err := b.c.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Stop returns once the supervisor has: nothing can start the
		// server again after it.
		select {
		case <-b.c.supervisorDone:
		default:
			t.Fatal("the supervisor still runs after Stop")
		}
		if !processGone(pid) {
			t.Errorf("postmaster %d still runs after Stop", pid)
		}
		if _, err := os.Stat(filepath.Join(b.c.DataDir(), "postmaster.pid")); !os.IsNotExist(err) {
			t.Errorf("postmaster.pid after Stop: %v", err)
		}
		if n := b.logs.count("embedded PostgreSQL exited") + b.logs.count("restarting embedded PostgreSQL"); n != 0 {
			t.Errorf("a clean stop was taken for a crash:\n%s", b.logs)
		}
	})

	t.Run("RestartIsNotACrash", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if err := b.c.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		old := kill(t, b.c) // the supervisor follows the restarted server
		back(t, b, old)
		if n := b.logs.count("embedded PostgreSQL exited"); n != 1 {
			t.Errorf("%d exits logged, want the kill's only:\n%s", n, b.logs)
		}
	})

	t.Run("FailedStartsBackOff", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// postgres refuses a data directory others may write to: every
		// start fails until the mode is fixed.
		dir := b.c.DataDir()
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		old := kill(t, b.c)
		testwait.For(t, "four failed starts", func() bool { return b.logs.count("embedded PostgreSQL did not start") >= 4 })
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		back(t, b, old)
		logs := b.logs.String()
		if !strings.Contains(logs, "invalid permissions") {
			t.Errorf("the failed starts do not say why:\n%s", logs)
		}
		var backoffs []string
		for _, m := range regexp.MustCompile(`msg="restarting embedded PostgreSQL" attempt=\d+ backoff=(\S+)`).FindAllStringSubmatch(logs, -1) {
			backoffs = append(backoffs, m[1])
		}
		if want := []string{"100ms", "200ms", "400ms", "800ms"}; len(backoffs) < 5 || !slices.Equal(backoffs[:4], want) {
			t.Errorf("backoffs %v, want %v and more", backoffs, want)
		}
	})

	t.Run("OrphanedBackendIsEnded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A backend busy in a query outlives its postmaster, and keeps the
		// shared memory that postgres will not start without. The timeout
		// ends it should the test fail.
		busy := connect(t, b.c.DSN("postgres"))
		var backend int
		if err := busy.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
			t.Fatal(err)
		}
		go busy.Exec(context.Background(), "SET statement_timeout = '60s'; DO $$ BEGIN LOOP END LOOP; END $$") //nolint:errcheck
		testwait.For(t, "the backend to run its query", func() bool {
			return strings.Contains(readFile(t, "/proc/"+strconv.Itoa(backend)+"/cmdline"), "DO")
		})
		old := kill(t, b.c)
		back(t, b, old)
		waitGone(t, backend)
		if !strings.Contains(b.logs.String(), `msg="ending the processes the dead embedded PostgreSQL left" pids=[`+strconv.Itoa(backend)+`]`) {
			t.Errorf("the backend was not ended by the supervisor:\n%s", b.logs)
		}
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	return string(b)
}
