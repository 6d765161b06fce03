// Package gwbin finds VersityGW's versitygw, the S3 server the tests run
// (package s3test), and builds it from the Go module proxy when it is
// missing. versitygw is not a dependency of convo: it is installed from its
// own module at the version in version.txt (`go install module@version`)
// into a cache directory keyed by that version, so go.mod stays free of it
// and a build is done once per machine.
package gwbin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	_ "embed"
)

// Package is versitygw's main package, in module github.com/versity/versitygw.
const Package = "github.com/versity/versitygw/cmd/versitygw"

// EnvCache names the environment variable that overrides the cache
// directory (its default is the user's cache directory, convo/versitygw).
const EnvCache = "CONVO_S3GW_CACHE"

//go:embed version.txt
var versionFile string

// Version is the version of versitygw's module that is built: a release
// tag on the Go module proxy (version.txt, which scripts/test.sh reads too).
func Version() string { return strings.TrimSpace(versionFile) }

// Path returns where versitygw of Version lives once built:
// <cache>/<version>/versitygw.
func Path() (string, error) {
	base := os.Getenv(EnvCache)
	if base == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("versitygw's cache directory: %w (set %s)", err, EnvCache)
		}
		base = filepath.Join(dir, "convo", "versitygw")
	}
	return filepath.Join(base, Version(), "versitygw"), nil
}

// Ensure returns the path of versitygw, building it first when it is
// missing. Concurrent callers, in this process or others (test binaries of
// several packages, scripts/test.sh's background build), build it once: the
// build holds an exclusive lock on a file next to it, and whoever gets the
// lock next finds the binary there. The go command's output goes to log. A
// cold build takes minutes of CPU (docs/performance.md); errors say what
// failed, with the go command's output.
func Ensure(ctx context.Context, log io.Writer) (string, error) {
	bin, err := Path()
	if err != nil {
		return "", err
	}
	if usable(bin) {
		return bin, nil
	}
	dir := filepath.Dir(bin)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("versitygw's cache directory: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, "build.lock"))
	if err != nil {
		return "", fmt.Errorf("lock versitygw's build: %w", err)
	}
	defer unlock()
	if usable(bin) { // built by whoever held the lock before
		return bin, nil
	}
	if err := build(ctx, bin, log); err != nil {
		return "", fmt.Errorf("build versitygw %s@%s: %w", Package, Version(), err)
	}
	return bin, nil
}

func usable(bin string) bool {
	fi, err := os.Stat(bin)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// build installs Package at Version into a temporary directory next to bin
// (GOBIN) and renames the binary into place: a build cut short leaves no
// binary at bin.
func build(ctx context.Context, bin string, log io.Writer) error {
	tmp, err := os.MkdirTemp(filepath.Dir(bin), "build-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// go test puts its toolchain's go first on PATH.
	cmd := exec.CommandContext(ctx, "go", "install", "-trimpath", Package+"@"+Version())
	cmd.Dir = os.TempDir() // outside any module: convo's go.mod plays no part
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off", "GO111MODULE=on",
		// None of the caller's GOFLAGS (such as -mod=vendor) applied to
		// another module; -mod=mod so that nothing reads or writes convo's.
		"GOFLAGS=-mod=mod -buildvcs=false")
	var stderr bytes.Buffer
	cmd.Stdout = log
	cmd.Stderr = io.MultiWriter(log, &stderr)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go install: %w: %s", err, tail(stderr.String(), 4000))
	}
	return os.Rename(filepath.Join(tmp, "versitygw"), bin)
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
