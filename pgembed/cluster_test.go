//go:build unix

package pgembed

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var quiet = slog.New(slog.DiscardHandler)

// testDir returns a fresh directory the postgres user can reach when the
// tests run as root (t.TempDir's directories are private to the test user),
// removed at cleanup.
func testDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgembed-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func startCluster(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return c
}

func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func queryString(t testing.TB, conn *pgx.Conn, sql string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(t.Context(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// processGone reports whether pid no longer runs (a zombie counts as gone:
// after its parent died it waits for an init process to reap it).
func processGone(pid int) bool {
	state, _ := inspectProcess(pid)
	return state == procGone
}

func waitGone(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.srv.cmd.Process.Pid
}

func TestCluster(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testDir(t), "data")
	c := startCluster(t, Options{DataDir: dataDir, Logical: true, Fast: true})
	ctx := t.Context()

	t.Run("AnswersQueries", func(t *testing.T) {
		conn := connect(t, c.DSN("postgres"))
		if got := queryString(t, conn, "SELECT current_user"); got != "postgres" {
			t.Errorf("current_user = %q, want postgres", got)
		}
		for setting, want := range map[string]string{
			"wal_level": "logical", "fsync": "off", "synchronous_commit": "off",
			"listen_addresses": "127.0.0.1", "max_connections": "200", "server_encoding": "UTF8",
		} {
			if got := queryString(t, conn, "SHOW "+setting); got != want {
				t.Errorf("%s = %q, want %q", setting, got, want)
			}
		}
		if !strings.HasPrefix(c.DSN("app"), "postgres://postgres:"+c.password+"@127.0.0.1:"+strconv.Itoa(c.Port())+"/app?") {
			t.Errorf("DSN = %q", c.DSN("app"))
		}
		if fi, err := os.Stat(c.LogFile()); err != nil || fi.Size() == 0 {
			t.Errorf("server log %s missing or empty: %v", c.LogFile(), err)
		}
	})

	t.Run("CreateDatabaseIsIdempotent", func(t *testing.T) {
		for range 2 {
			if err := c.CreateDatabase(ctx, "app"); err != nil {
				t.Fatalf("CreateDatabase: %v", err)
			}
		}
		conn := connect(t, c.DSN("app"))
		if _, err := conn.Exec(ctx, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("RestartKeepsDataAndPort", func(t *testing.T) {
		port, pid := c.Port(), c.pid()
		before := connect(t, c.DSN("app"))
		// Committed just before the outage, with synchronous_commit=off.
		if _, err := before.Exec(ctx, "INSERT INTO kept VALUES (2)"); err != nil {
			t.Fatal(err)
		}
		if err := c.Restart(ctx); err != nil {
			t.Fatalf("Restart: %v", err)
		}
		if c.Port() != port {
			t.Errorf("port after restart = %d, want %d", c.Port(), port)
		}
		if c.pid() == pid {
			t.Errorf("postmaster PID unchanged after restart")
		}
		if err := before.Ping(ctx); err == nil {
			t.Errorf("a connection opened before the restart still works")
		}
		after := connect(t, c.DSN("app"))
		if got := queryString(t, after, "SELECT string_agg(n::text, ',' ORDER BY n) FROM kept"); got != "1,2" {
			t.Errorf("rows after restart = %q, want 1,2", got)
		}
	})

	port := c.Port()
	t.Run("StopEndsTheProcess", func(t *testing.T) {
		pid := c.pid()
		if err := c.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if !processGone(pid) {
			t.Errorf("postmaster %d still runs after Stop", pid)
		}
		if _, err := os.Stat(filepath.Join(dataDir, "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("postmaster.pid left behind: %v", err)
		}
		if !portFree(port) {
			t.Errorf("port %d still taken after Stop", port)
		}
		if err := c.Stop(ctx); err != nil {
			t.Errorf("second Stop: %v", err)
		}
		if err := c.Restart(ctx); err == nil {
			t.Errorf("Restart of a stopped cluster succeeded")
		}
	})

	t.Run("StartReusesDataDir", func(t *testing.T) {
		c2 := startCluster(t, Options{DataDir: dataDir, Port: port, Fast: true})
		if c2.Port() != port {
			t.Errorf("port = %d, want the free port %d that was asked for", c2.Port(), port)
		}
		conn := connect(t, c2.DSN("app"))
		if got := queryString(t, conn, "SELECT count(*)::text FROM kept"); got != "2" {
			t.Errorf("rows = %s, want 2", got)
		}
		if _, err := os.Stat(c2.LogFile() + ".1"); err != nil {
			t.Errorf("previous server log not kept: %v", err)
		}
	})
}

func TestStartDataDirStates(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testDir(t), "data")
	c := startCluster(t, Options{DataDir: dataDir, Fast: true})
	ctx := t.Context()
	pidFile := filepath.Join(dataDir, "postmaster.pid")

	t.Run("RefusesARunningServer", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := Start(ctx, Options{DataDir: dataDir, Logger: quiet})
		if err == nil || !strings.Contains(err.Error(), "used by a running postgres") {
			t.Fatalf("Start on a data directory in use: err = %v", err)
		}
	})

	t.Run("AfterCrash", func(t *testing.T) {
		// A SIGKILLed postmaster leaves postmaster.pid and, for a moment,
		// its children attached to the shared memory.
		pid := c.pid()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitGone(t, pid)
		if _, err := os.Stat(pidFile); err != nil {
			t.Fatalf("postmaster.pid should survive a crash: %v", err)
		}
		c2 := startCluster(t, Options{DataDir: dataDir, Fast: true})
		if err := c2.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})

	stalePIDFile := func(t *testing.T, pid int) {
		t.Helper()
		content := strconv.Itoa(pid) + "\n" + dataDir + "\n1700000000\n5432\n" + dataDir + "\n127.0.0.1\n  1 2\nready   \n"
		if err := os.WriteFile(pidFile, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		c := startCluster(t, Options{DataDir: dataDir, Fast: true})
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("StalePIDOfAnotherProgram", func(t *testing.T) {
		other := exec.Command("sleep", "60")
		if err := other.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { other.Process.Kill(); other.Wait() }()
		stalePIDFile(t, other.Process.Pid)
	})

	t.Run("StalePIDOfAnotherCluster", func(t *testing.T) {
		other := startCluster(t, Options{DataDir: filepath.Join(testDir(t), "other"), Fast: true})
		stalePIDFile(t, other.pid())
	})

	t.Run("StaleSocketLock", func(t *testing.T) {
		// A postmaster killed with SIGKILL leaves its socket's lock file
		// too, naming a PID that another cluster's postgres may have by
		// the next start: postgres itself would refuse to start then.
		other := startCluster(t, Options{DataDir: filepath.Join(testDir(t), "other"), Fast: true})
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		lock := filepath.Join(dataDir, ".s.PGSQL."+strconv.Itoa(port)+".lock")
		content := strconv.Itoa(other.pid()) + "\n" + dataDir + "\n1700000000\n" + strconv.Itoa(port) + "\n" + dataDir + "\n"
		if err := os.WriteFile(lock, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		c := startCluster(t, Options{DataDir: dataDir, Port: port, Fast: true})
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("StalePIDOfAZombie", func(t *testing.T) {
		zombie := exec.Command("true")
		if err := zombie.Start(); err != nil {
			t.Fatal(err)
		}
		defer zombie.Wait()
		waitGone(t, zombie.Process.Pid) // exits, and stays unreaped until Wait
		stalePIDFile(t, zombie.Process.Pid)
	})
}

func TestStartMovesOffATakenPort(t *testing.T) {
	t.Parallel()
	taken, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	holder := startCluster(t, Options{DataDir: filepath.Join(testDir(t), "a"), Port: taken, Fast: true})
	if holder.Port() != taken {
		t.Fatalf("port = %d, want the free port %d", holder.Port(), taken)
	}
	c := startCluster(t, Options{DataDir: filepath.Join(testDir(t), "b"), Port: taken, Fast: true})
	if c.Port() == taken {
		t.Fatalf("second cluster claims the taken port %d", taken)
	}
	conn := connect(t, c.DSN("postgres"))
	if got := queryString(t, conn, "SHOW data_directory"); got != c.DataDir() {
		t.Errorf("DSN reaches %s, want %s", got, c.DataDir())
	}
}

func TestStartWithoutBinaries(t *testing.T) {
	t.Parallel()
	_, err := Start(t.Context(), Options{BinDir: t.TempDir(), DataDir: t.TempDir(), Logger: quiet})
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("err = %v, want ErrNotInstalled", err)
	}
	for _, want := range []string{"apt-get install postgresql", "DATABASE_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestLongDataDirUsesTemporarySocketDir(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testDir(t), strings.Repeat("d", maxSocketDirLen))
	c := startCluster(t, Options{DataDir: dataDir, Fast: true})
	sock := c.SocketDir()
	if sock == c.DataDir() {
		t.Fatalf("socket directory is the %d-byte data directory", len(dataDir))
	}
	if _, err := os.Stat(filepath.Join(sock, ".s.PGSQL."+strconv.Itoa(c.Port()))); err != nil {
		t.Errorf("socket: %v", err)
	}
	if err := c.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary socket directory left behind: %v", err)
	}
}

// TestStartInEmptyDataDir starts a cluster in a data directory that
// exists and is empty (a volume prepared by an operator), which rename
// cannot replace: initdb writes into it directly.
func TestStartInEmptyDataDir(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testDir(t), "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, Options{DataDir: dataDir, Fast: true})
	if err := c.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err != nil {
		t.Errorf("no cluster in the data directory: %v", err)
	}
}
