package upgradetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/internal/pgtest"
)

// buildPrevious builds PreviousRelease's cmd/api from git (git archive
// into a temporary directory), without the race detector, with the
// shared build cache: the modules it depends on are compiled once for
// every build (-trimpath would compile them all again), and only its own
// packages, in another directory, are compiled here. Without the commit in this clone's
// history it fails the test saying how to fetch it.
func buildPrevious(t *testing.T) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("upgradetest: this test builds the previous release from git history, and git found no repository here: %v", err)
	}
	root := strings.TrimSpace(string(top))
	if err := exec.Command("git", "-C", root, "cat-file", "-e", PreviousRelease+"^{commit}").Run(); err != nil {
		t.Fatalf("upgradetest: the previous release's commit %s is not in this clone's history (a shallow clone?); "+
			"fetch it with `git fetch --unshallow` or `git fetch origin %s`, then run the test again", PreviousRelease, PreviousRelease)
	}
	dir := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", PreviousRelease)
	extract := exec.Command("tar", "-x", "-C", dir)
	var archiveErr, extractErr bytes.Buffer
	archive.Stderr, extract.Stderr = &archiveErr, &extractErr
	if extract.Stdin, err = archive.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := extract.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", PreviousRelease, err, archiveErr.String())
	}
	if err := extract.Wait(); err != nil {
		t.Fatalf("extracting %s: %v\n%s", PreviousRelease, err, extractErr.String())
	}
	bin := filepath.Join(dir, "convo-api-previous")
	start := time.Now()
	build := exec.Command("go", "build", "-o", bin, "./cmd/api")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the previous release's cmd/api (%s): %v\n%s", PreviousRelease, err, out)
	}
	t.Logf("built the previous release's cmd/api in %s", time.Since(start).Round(100*time.Millisecond))
	return bin
}

// emptyDatabase creates a database without the schema (pgtest's hold this
// release's) on pgtest's server, dropped when the test ends.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	name := fmt.Sprintf("upgrade_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)") }) //nolint:errcheck
	cfg := admin.Config()
	return fmt.Sprintf("host=%s port=%d user=%s password='%s' dbname=%s", cfg.Host, cfg.Port, cfg.User, cfg.Password, name)
}

// server is a convo server process.
type server struct {
	name string
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
}

func (s *server) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// startServer starts bin with env and returns once it serves.
func startServer(t *testing.T, name, bin string, env ...string) *server {
	t.Helper()
	cmd := exec.Command(bin, "--http-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{name: name, cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() { cmd.Process.Kill(); <-s.done }) //nolint:errcheck
	serving := make(chan string, 1)
	urlRE := regexp.MustCompile(`msg="convo is serving" url="?([^"\s]+)`)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			fmt.Fprintln(&s.logs, sc.Text())
			s.mu.Unlock()
			if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
				serving <- m[1]
			}
		}
		cmd.Wait() //nolint:errcheck
	}()
	select {
	case s.url = <-serving:
		return s
	case <-s.done:
		t.Fatalf("the %s server exited before serving:\n%s", name, s.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("the %s server did not serve within 60 s:\n%s", name, s.log())
	}
	return nil
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-s.done
	if !s.cmd.ProcessState.Success() {
		t.Errorf("the %s server exited with %v after SIGTERM:\n%s", s.name, s.cmd.ProcessState, s.log())
	}
}
