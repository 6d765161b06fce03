//go:build unix

package pgembed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitdbFailureShowsItsLines checks that when initdb fails, its output
// comes back as lines (one per line initdb wrote), after a line that names
// the data directory.
func TestInitdbFailureShowsItsLines(t *testing.T) {
	t.Parallel()
	bin := testDir(t)
	for name, script := range map[string]string{
		"initdb":   "#!/bin/sh\necho 'initdb: first problem'\necho 'initdb: second problem' >&2\nexit 1\n",
		"postgres": "#!/bin/sh\nexit 1\n",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dataDir := filepath.Join(testDir(t), "data")
	_, err := Start(t.Context(), Options{BinDir: bin, DataDir: dataDir, Logger: quiet})
	if err == nil {
		t.Fatal("Start succeeded with an initdb that fails")
	}
	lines := strings.Split(err.Error(), "\n")
	if !strings.Contains(lines[0], "initdb "+dataDir) {
		t.Errorf("first line %q does not name the data directory %s", lines[0], dataDir)
	}
	want := []string{"  initdb: first problem", "  initdb: second problem"}
	if len(lines) != 3 || lines[1] != want[0] || lines[2] != want[1] {
		t.Errorf("error lines = %q, want the first line then %q", lines, want)
	}
	if _, err := os.Stat(dataDir + ".initdb"); !os.IsNotExist(err) {
		t.Errorf("the half-made data directory is left behind: %v", err)
	}
}

// TestDataDirUnderAClosedParent checks that, as root, a data directory
// under a parent the postgres user cannot enter is refused before anything
// is made, by an error naming that parent and the rule.
func TestDataDirUnderAClosedParent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: postgres runs as the current user, who made the directories")
	}
	t.Parallel()
	closed := filepath.Join(testDir(t), "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(closed, "sub", "data")
	_, err := Start(t.Context(), Options{DataDir: dataDir, Fast: true, Logger: quiet})
	if err == nil {
		t.Fatal("Start succeeded under a parent the postgres user cannot enter")
	}
	for _, want := range []string{"parent directory " + closed + " ", "mode 0700", "chmod o+x " + closed, "user postgres cannot enter"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(closed, "sub")); !os.IsNotExist(err) {
		t.Errorf("Start made directories before refusing: %v", err)
	}
}

// TestDataDirUnderAFile checks that a data directory whose parent is a
// file is refused with an error naming it.
func TestDataDirUnderAFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(testDir(t), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(file, "data")
	_, err := Start(t.Context(), Options{DataDir: dataDir, Fast: true, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("err = %v, want one naming %s", err, file)
	}
}

// TestDefaultDataDirFollowsHome checks that the default data directory is
// the user's own (under HOME's cache), for root too when the postgres
// user can reach it, and RootDataDir when it cannot.
func TestDefaultDataDirFollowsHome(t *testing.T) {
	// t.Setenv: not parallel.
	home := filepath.Join(testDir(t), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	dir, err := DefaultDataDir()
	if want := filepath.Join(home, ".cache", "convo", "pgdata"); err != nil || dir != want {
		t.Errorf("DefaultDataDir() = %q, %v; want %q", dir, err, want)
	}
	if os.Geteuid() != 0 {
		return
	}
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if dir, err := DefaultDataDir(); err != nil || dir != RootDataDir {
		t.Errorf("root, HOME closed to postgres: DefaultDataDir() = %q, %v; want %q", dir, err, RootDataDir)
	}
}
