// Package testbin builds the commands that tests run as processes (the
// server, the worker), once per test binary, with the race detector exactly
// when the test binary has it.
//
// Built alike, a command shares every compiled package with the tests
// themselves: under `go test -race ./...` (make test) no package is
// compiled a second time without the race detector only to link a server,
// and each command is linked once however many tests start it. A server
// built with the race detector also reports a data race of its own.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

// Race says whether this test binary, and so every command Build builds,
// has the race detector.
const Race = race

var (
	mu     sync.Mutex
	dir    string
	built  int // names the files apart
	builds = map[string]*build{}
)

type build struct {
	once sync.Once
	bin  string
	err  error
}

// Build returns the path of the command pkg (an import path, such as
// github.com/convo-dev/convo/cmd/api) built by `go build`, with -race when
// Race is set. The first call builds it; later ones, from any test, wait
// for that build and get the same file, which every user may read and run
// (tests run it as the postgres user) and which tests must not change. A
// failed build fails every test that asks for it, with go build's output.
// Remove deletes the files at the end of the test binary.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	mu.Lock()
	b := builds[pkg]
	if b == nil {
		b = &build{}
		builds[pkg] = b
	}
	mu.Unlock()
	b.once.Do(func() { b.bin, b.err = compile(pkg) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

func compile(pkg string) (string, error) {
	mu.Lock()
	if dir == "" {
		d, err := os.MkdirTemp("", "convo-testbin-")
		if err != nil {
			mu.Unlock()
			return "", err
		}
		// MkdirTemp makes it 0700: the postgres user must reach the binaries.
		if err := os.Chmod(d, 0o755); err != nil {
			mu.Unlock()
			return "", err
		}
		dir = d
	}
	built++
	bin := filepath.Join(dir, fmt.Sprintf("%s-%d", path.Base(pkg), built))
	mu.Unlock()
	args := []string{"build"}
	if Race {
		args = append(args, "-race")
	}
	args = append(args, "-o", bin, pkg)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %v: %v\n%s", args, err, out)
	}
	return bin, nil
}

// Remove deletes every command Build built. Call it once the tests have
// run (pgtest.Main(m, testbin.Remove)).
func Remove() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir) //nolint:errcheck
	}
}
