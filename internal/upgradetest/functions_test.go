package upgradetest

import (
	"errors"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"testing"
)

// newestMigration returns the newest version among the migration file
// names (db/schema's NNNNN_name.sql).
func newestMigration(t *testing.T, names []string) int64 {
	t.Helper()
	var newest int64
	for _, name := range names {
		digits, _, _ := strings.Cut(path.Base(name), "_")
		if v, err := strconv.ParseInt(digits, 10, 64); err == nil && strings.HasSuffix(name, ".sql") {
			newest = max(newest, v)
		}
	}
	return newest
}

// TestFunctionsChangeWithAMigration checks that db/functions differs from
// the previous release's only if this release adds a migration: a server
// applies its functions only to a database at its own newest migration or
// older (db.Upgrade), so functions changed under the same version would be
// overwritten by a restarting server of the previous release.
func TestFunctionsChangeWithAMigration(t *testing.T) {
	t.Parallel()
	if err := exec.Command("git", "cat-file", "-e", PreviousRelease+"^{commit}").Run(); err != nil {
		t.Fatalf("upgradetest: the previous release's commit %s is not in this clone's history (a shallow clone?); "+
			"fetch it with `git fetch --unshallow` or `git fetch origin %s`, then run the test again", PreviousRelease, PreviousRelease)
	}
	out, err := exec.Command("git", "ls-tree", "--name-only", PreviousRelease, "../../db/schema/").Output()
	if err != nil {
		t.Fatalf("git ls-tree: %v", err)
	}
	previous := newestMigration(t, strings.Fields(string(out)))
	entries, err := os.ReadDir("../../db/schema")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	current := newestMigration(t, names)
	// Against the working tree, so that an edit not yet committed counts.
	var changed bool
	if err := exec.Command("git", "diff", "--quiet", PreviousRelease, "--", "../../db/functions/").Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 { // 1: they differ
			t.Fatalf("git diff %s -- db/functions: %v", PreviousRelease, err)
		}
		changed = true
	}
	if previous == 0 || current < previous {
		t.Fatalf("the newest migration is %d here and %d in the previous release %s", current, previous, PreviousRelease)
	}
	if changed && current == previous {
		t.Errorf("db/functions changed since the previous release (%s) but no migration was added (both at %d): "+
			"add one (db/README.md, \"Migrations for rolling upgrades\")", PreviousRelease, current)
	}
	t.Logf("previous release at migration %d, this one at %d; db/functions changed: %v", previous, current, changed)
}
