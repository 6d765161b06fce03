package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/pgembed"
)

// TestEmbeddedFirstStart follows a newcomer's `make run` on a new data
// directory, then a second `make run` beside it, then a start after the
// first one stopped: what each says, in order, and that the port, the
// printed URLs (with their passwords) and the refusal of a second server
// hold.
func TestEmbeddedFirstStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir := filepath.Join(tempDirFor(t, "postgres"), "pgdata")
	start := func(t *testing.T) (*Main, *syncBuffer, *bytes.Buffer, error) {
		t.Helper()
		logs, stdout := &syncBuffer{}, &bytes.Buffer{}
		m := NewMain()
		m.Stdout = stdout
		m.Logger = slog.New(slog.NewTextHandler(logs, nil)) // the default level: info
		// No CONVO_EMBED_PORT: the data directory's own port.
		env := map[string]string{"CONVO_HTTP_ADDR": "127.0.0.1:0", "CONVO_DATA_DIR": dataDir}
		if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
			t.Fatal(err)
		}
		err := m.Run(ctx)
		if err != nil {
			m.Close()
		}
		return m, logs, stdout, err
	}
	// inOrder checks that each of want is on a line of logs after the
	// line of the one before.
	inOrder := func(t *testing.T, logs string, want ...string) {
		t.Helper()
		lines := strings.Split(logs, "\n")
		i := 0
		for _, w := range want {
			for i < len(lines) && !strings.Contains(lines[i], w) {
				i++
			}
			if i == len(lines) {
				t.Fatalf("no %q (after the lines before it) in the log:\n%s", w, logs)
			}
		}
	}

	first, logs, stdout, err := start(t)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	port := first.cluster.Port()
	inOrder(t, logs.String(),
		`msg="starting the embedded PostgreSQL; its data directory is new" data_dir=`+dataDir,
		`msg="initialising a new PostgreSQL data directory (initdb; first start only`,
		fmt.Sprintf(`msg="embedded PostgreSQL started on port %d"`, port),
		fmt.Sprintf(`msg="the embedded PostgreSQL keeps port %d from now on"`, port),
		`msg="migrating the database"`,
		`worker_database_url="postgres://convo_worker_login:`,
		`msg="workers started" workers=1`,
		`msg="convo is serving" url=`+first.URL(),
		`msg="open `+first.URL()+` in a browser"`)

	// The printed URLs carry their passwords: psql and clients that need
	// one (node-postgres) connect with them as printed.
	password, err := os.ReadFile(filepath.Join(dataDir, pgembed.PasswordFileName))
	if err != nil {
		t.Fatal(err)
	}
	urls := regexp.MustCompile(`(?m)^convo database for (workers|psql \(superuser\)): (\S+)$`).FindAllStringSubmatch(stdout.String(), -1)
	if len(urls) != 2 {
		t.Fatalf("stdout does not print the two URLs:\n%s", stdout)
	}
	if admin := urls[1][2]; !strings.HasPrefix(admin, "postgres://postgres:"+strings.TrimSpace(string(password))+"@127.0.0.1:") {
		t.Errorf("the admin URL %s does not carry the password of %s", admin, pgembed.PasswordFileName)
	}
	for _, u := range urls {
		conn, err := pgx.Connect(ctx, u[2])
		if err != nil {
			t.Fatalf("connect with the printed URL for %s: %v", u[1], err)
		}
		conn.Close(ctx)
	}

	t.Run("SecondStartSaysWhereTheFirstServes", func(t *testing.T) {
		pid := postmasterPID(t, dataDir)
		_, logs, _, err := start(t)
		want := fmt.Sprintf("convo is already running at %s (pid %d)", first.URL(), os.Getpid())
		if !errors.Is(err, errAlreadyRunning) || !strings.Contains(err.Error(), want) {
			t.Fatalf("second start: err = %v, want %q", err, want)
		}
		if strings.Contains(logs.String(), "embedded PostgreSQL") {
			t.Errorf("the second start touched PostgreSQL:\n%s", logs)
		}
		if postmasterPID(t, dataDir) != pid {
			t.Error("the first server's PostgreSQL changed")
		}
		expectHealth(t, first.URL(), 200)
	})

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, runningFileName)); !os.IsNotExist(err) {
		t.Errorf("the running file outlives the server: %v", err)
	}

	t.Run("LaterStartKeepsThePortAndIgnoresAStaleRunningFile", func(t *testing.T) {
		// What a killed server leaves: a file nobody holds, with a pid.
		stale := filepath.Join(dataDir, runningFileName)
		if err := os.WriteFile(stale, []byte("999999\nhttp://127.0.0.1:1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		again, logs, _, err := start(t)
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		if again.cluster.Port() != port {
			t.Errorf("later start on port %d, want the first start's %d", again.cluster.Port(), port)
		}
		inOrder(t, logs.String(),
			`msg="starting the embedded PostgreSQL" data_dir=`+dataDir,
			fmt.Sprintf(`msg="embedded PostgreSQL started on port %d"`, port),
			`msg="migrating the database"`,
			`msg="convo is serving" url=`+again.URL())
		if strings.Contains(logs.String(), "initdb") || strings.Contains(logs.String(), "keeps port") {
			t.Errorf("a later start says what only a first one does:\n%s", logs)
		}
		b, err := os.ReadFile(stale)
		if pid, url := readRunning(bytes.NewReader(b)); err != nil || pid != os.Getpid() || url != again.URL() {
			t.Errorf("running file = %q, %v; want this pid and %s", b, err, again.URL())
		}
	})
}

// TestLogFailureShowsLines checks that a failure whose error spans lines
// (initdb's output, a server log's tail) is logged as one line and then
// its lines as they are, not as one string of \n escapes.
func TestLogFailureShowsLines(t *testing.T) {
	t.Parallel()
	var logs, stderr bytes.Buffer
	logFailure(slog.New(slog.NewTextHandler(&logs, nil)), &stderr, "convo failed to start",
		errors.New("initdb /d: exit status 1; initdb said:\n  initdb: first\n  initdb: second"))
	if !strings.Contains(logs.String(), `err="initdb /d: exit status 1; initdb said:"`) || strings.Contains(logs.String(), `\n`) {
		t.Errorf("log = %q", logs.String())
	}
	if want := "      initdb: first\n      initdb: second\n"; stderr.String() != want {
		t.Errorf("lines = %q, want %q", stderr.String(), want)
	}
	logs.Reset()
	stderr.Reset()
	logFailure(slog.New(slog.NewTextHandler(&logs, nil)), &stderr, "convo failed to start", errors.New("one line"))
	if !strings.Contains(logs.String(), `err="one line"`) || stderr.Len() != 0 {
		t.Errorf("one-line error: log %q, lines %q", logs.String(), stderr.String())
	}
}
