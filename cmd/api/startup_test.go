package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/convo-dev/convo/internal/pgtest"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestStartupLog checks what a newcomer reads at start: the address to
// open in a browser, and who answers prompts (the in-process workers, or
// nobody until an outside worker runs), and that a server without
// workers does not claim to drain any.
func TestStartupLog(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, workers string) string {
		logs := &syncBuffer{}
		m := NewMain()
		m.Stdout = io.Discard
		m.Logger = slog.New(slog.NewTextHandler(logs, nil))
		env := map[string]string{"CONVO_HTTP_ADDR": "127.0.0.1:0", "CONVO_WORKERS": workers, "DATABASE_URL": pgtest.DSN(t)}
		if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
			t.Fatal(err)
		}
		if err := m.Run(context.Background()); err != nil {
			m.Close()
			t.Fatal(err)
		}
		url := m.URL()
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if want := `msg="open ` + url + ` in a browser"`; !strings.Contains(logs.String(), want) {
			t.Errorf("no %s in the log:\n%s", want, logs)
		}
		return logs.String()
	}
	t.Run("InProcessWorkers", func(t *testing.T) {
		t.Parallel()
		logs := run(t, "2")
		if !regexp.MustCompile(`msg="workers started" workers=2 `).MatchString(logs) {
			t.Errorf("the log does not say that 2 in-process workers run:\n%s", logs)
		}
		if strings.Contains(logs, "no workers") {
			t.Errorf("the log says there are no workers:\n%s", logs)
		}
	})
	t.Run("NoWorkers", func(t *testing.T) {
		t.Parallel()
		logs := run(t, "0")
		if want := "no workers: prompts wait for an outside worker, for example `go run ./cmd/worker`"; !strings.Contains(logs, want) {
			t.Errorf("no %q in the log:\n%s", want, logs)
		}
		if strings.Contains(logs, "drained") || strings.Contains(logs, "workers started") {
			t.Errorf("a server without workers logs about workers:\n%s", logs)
		}
	})
}

// TestCtrlC runs the server binary as `make run` does and interrupts it
// as a terminal's Ctrl-C does (SIGINT): it must drain, stop and exit 0,
// and every line it wrote to stderr must be in the configured log format.
func TestCtrlC(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "api")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	p := startProcess(t, bin, "DATABASE_URL="+pgtest.DSN(t))
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-p.stderrDone
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("server exited with %v after SIGINT, want 0", err)
	}
	lines := strings.Split(strings.TrimSpace(p.logs.String()), "\n")
	shutdown := false
	for _, line := range lines {
		if !strings.HasPrefix(line, "time=") {
			t.Errorf("line not in the log format: %q", line)
		}
		shutdown = shutdown || strings.Contains(line, `level=INFO msg="shutting down"`)
	}
	if !shutdown {
		t.Errorf("no shutting down line:\n%s", strings.Join(lines, "\n"))
	}
}
