package pgembed

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNotInstalled reports that the PostgreSQL server executables (postgres
// and initdb) were not found. The error returned by Start wraps it and says
// what to install.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (postgres, initdb) not found")

// binaries are the absolute paths of the executables pgembed runs.
type binaries struct {
	postgres string
	initdb   string
}

// findBinaries looks for a directory holding both postgres and initdb:
// binDir when set, else PATH, then the usual distribution locations with
// the newest major version first.
func findBinaries(binDir string) (binaries, error) {
	if binDir != "" {
		b, ok := binariesIn(binDir)
		if !ok {
			return binaries{}, fmt.Errorf("%w in %s: install them (Debian/Ubuntu: apt-get install postgresql) "+
				"or set DATABASE_URL to use an existing server", ErrNotInstalled, binDir)
		}
		return b, nil
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		if b, ok := binariesIn(filepath.Dir(p)); ok {
			return b, nil
		}
	}
	var candidates []string
	candidates = append(candidates, newestFirst("/usr/lib/postgresql/*/bin", "/usr/lib/postgresql/")...)
	candidates = append(candidates, newestFirst("/usr/pgsql-*/bin", "/usr/pgsql-")...)
	candidates = append(candidates, "/usr/local/pgsql/bin")
	for _, dir := range candidates {
		if b, ok := binariesIn(dir); ok {
			return b, nil
		}
	}
	return binaries{}, fmt.Errorf("%w in PATH, /usr/lib/postgresql/*/bin, /usr/pgsql-*/bin or /usr/local/pgsql/bin: "+
		"install them (Debian/Ubuntu: apt-get install postgresql) or set DATABASE_URL to use an existing server",
		ErrNotInstalled)
}

func binariesIn(dir string) (binaries, bool) {
	b := binaries{
		postgres: filepath.Join(dir, "postgres"),
		initdb:   filepath.Join(dir, "initdb"),
	}
	for _, p := range []string{b.postgres, b.initdb} {
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return binaries{}, false
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return binaries{}, false
	}
	b.postgres, b.initdb = filepath.Join(abs, "postgres"), filepath.Join(abs, "initdb")
	return b, true
}

// newestFirst globs pattern and orders the matches by the number that
// follows prefix (the major version), highest first.
func newestFirst(pattern, prefix string) []string {
	matches, _ := filepath.Glob(pattern)
	version := func(p string) float64 {
		rest, _, _ := strings.Cut(strings.TrimPrefix(p, prefix), "/")
		v, _ := strconv.ParseFloat(rest, 64)
		return v
	}
	slices.SortStableFunc(matches, func(a, b string) int { return cmp.Compare(version(b), version(a)) })
	return matches
}

// isFile reports whether path names a file (not a directory).
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}
