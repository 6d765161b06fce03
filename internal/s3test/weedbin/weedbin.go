// Package weedbin finds SeaweedFS's weed, the S3 server the tests run
// (package s3test), and builds it from the Go module proxy when it is
// missing. weed is not a dependency of convo: it is built from its own
// module (version.txt) into a cache directory keyed by that version, so
// go.mod stays free of it and a build is done once per machine.
//
// `go install module/weed@version` refuses SeaweedFS's module, whose go.mod
// holds a replace directive; so the module is downloaded (go mod download)
// and built as the main module in its own directory, which honours it.
package weedbin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	_ "embed"
)

// Module is SeaweedFS's Go module; weed is its package ./weed.
const Module = "github.com/seaweedfs/seaweedfs"

// EnvCache names the environment variable that overrides the cache
// directory (its default is the user's cache directory, convo/weed).
const EnvCache = "CONVO_WEED_CACHE"

//go:embed version.txt
var versionFile string

// Version is the version of Module that is built: a pseudo-version on the
// Go module proxy (version.txt, which scripts/test.sh reads too).
func Version() string { return strings.TrimSpace(versionFile) }

// Path returns where weed of Version lives once built:
// <cache>/<version>/weed.
func Path() (string, error) {
	base := os.Getenv(EnvCache)
	if base == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("weed's cache directory: %w (set %s)", err, EnvCache)
		}
		base = filepath.Join(dir, "convo", "weed")
	}
	return filepath.Join(base, Version(), "weed"), nil
}

// Ensure returns the path of weed, building it first when it is missing.
// Concurrent callers, in this process or others (test binaries of several
// packages, scripts/test.sh's background build), build it once: the build
// holds an exclusive lock on a file next to it, and whoever gets the lock
// next finds the binary there. The go command's output goes to log. A cold
// build takes minutes (docs/performance.md); errors say what failed, with
// the go command's output.
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
		return "", fmt.Errorf("weed's cache directory: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, "build.lock"))
	if err != nil {
		return "", fmt.Errorf("lock weed's build: %w", err)
	}
	defer unlock()
	if usable(bin) { // built by whoever held the lock before
		return bin, nil
	}
	if err := build(ctx, bin, log); err != nil {
		return "", fmt.Errorf("build weed %s@%s: %w", Module, Version(), err)
	}
	return bin, nil
}

func usable(bin string) bool {
	fi, err := os.Stat(bin)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// build downloads Module at Version and builds ./weed into bin, through a
// temporary file renamed into place: a build cut short leaves no binary.
func build(ctx context.Context, bin string, log io.Writer) error {
	// go test puts its toolchain's go first on PATH.
	const goBin = "go"
	var out bytes.Buffer
	dl := exec.CommandContext(ctx, goBin, "mod", "download", "-json", Module+"@"+Version())
	dl.Dir = os.TempDir() // outside any module: convo's go.mod plays no part
	dl.Env = goEnv()
	dl.Stdout = &out
	dl.Stderr = log
	if err := dl.Run(); err != nil {
		return fmt.Errorf("go mod download: %w: %s", err, strings.TrimSpace(out.String()))
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out.Bytes(), &mod); err != nil {
		return fmt.Errorf("go mod download: %w", err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return fmt.Errorf("go mod download: %s", cmpOr(mod.Error, "no directory"))
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	defer os.Remove(tmp)
	b := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-o", tmp, "./weed")
	b.Dir = mod.Dir
	b.Env = goEnv()
	var stderr bytes.Buffer
	b.Stdout = log
	b.Stderr = io.MultiWriter(log, &stderr)
	if err := b.Run(); err != nil {
		return fmt.Errorf("go build: %w: %s", err, tail(stderr.String(), 4000))
	}
	return os.Rename(tmp, bin)
}

// goEnv is the environment of the go commands: no workspace, and none of
// the caller's GOFLAGS (such as -mod=vendor) applied to another module.
func goEnv() []string {
	env := os.Environ()
	return append(env, "GOWORK=off", "GOFLAGS=-buildvcs=false", "GO111MODULE=on")
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
