package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/convo-dev/convo/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// EnvRuntimes selects the runtimes to run (a comma list; default all).
const EnvRuntimes = "CONVO_CONFORMANCE_RUNTIMES"

// runtime is a worker runtime under test, and how to get its runner.
type runtime struct {
	name string
	// env names the variable holding the path of an executable that
	// starts the runner (scripts/sdk-setup.sh prints it); "" for the Go
	// runtime, whose runner the driver builds.
	env string
}

// runtimes is the table of runtimes: a new one needs a runner that
// follows README.md's contract, and a line here.
var runtimes = []runtime{
	{name: "go"},
	{name: "typescript", env: "CONVO_CONFORMANCE_TYPESCRIPT"},
	{name: "python", env: "CONVO_CONFORMANCE_PYTHON"},
}

// TestConformance runs every scenario against every selected runtime:
// runtimes in parallel, and the scenarios of a runtime in parallel too,
// each in its own database with its own runner process.
func TestConformance(t *testing.T) {
	scenarios, err := LoadScenarios("scenarios")
	if err != nil {
		t.Fatalf("scenarios: %v", err)
	}
	for _, rt := range selectedRuntimes(t) {
		t.Run(rt.name, func(t *testing.T) {
			t.Parallel()
			exe := rt.runner(t)
			for _, sc := range scenarios {
				t.Run(sc.Name, func(t *testing.T) {
					t.Parallel()
					runScenario(t, rt.name, exe, sc)
				})
			}
		})
	}
}

// selectedRuntimes reads EnvRuntimes.
func selectedRuntimes(t *testing.T) []runtime {
	t.Helper()
	v := os.Getenv(EnvRuntimes)
	if strings.TrimSpace(v) == "" {
		return runtimes
	}
	var names []string
	for _, rt := range runtimes {
		names = append(names, rt.name)
	}
	var out []runtime
	for name := range strings.SplitSeq(v, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(runtimes, func(rt runtime) bool { return rt.name == name })
		if i < 0 {
			t.Fatalf("%s=%q: unknown runtime %q (the runtimes are %s)", EnvRuntimes, v, name, strings.Join(names, ", "))
		}
		if !slices.ContainsFunc(out, func(rt runtime) bool { return rt.name == name }) {
			out = append(out, runtimes[i])
		}
	}
	return out
}

// runner returns the path of the runtime's runner executable: the Go one
// built with the race detector into the test's temporary directory, the
// others from their variable. A runtime selected but not set up fails,
// saying how to set it up.
func (rt runtime) runner(t *testing.T) string {
	t.Helper()
	if rt.env == "" {
		exe := filepath.Join(t.TempDir(), "goworker")
		out, err := exec.Command("go", "build", "-race", "-o", exe, "./goworker").CombinedOutput()
		if err != nil {
			t.Fatalf("build the Go runner (go build -race ./conformance/goworker): %v\n%s", err, out)
		}
		return exe
	}
	exe := os.Getenv(rt.env)
	if exe == "" {
		t.Fatalf("runtime %s: %s is not set. Run scripts/sdk-setup.sh, which installs the SDKs into scratch projects and prints the variables to export, "+
			"or leave %s out of %s (for example %s=go)", rt.name, rt.env, rt.name, EnvRuntimes, EnvRuntimes)
	}
	info, err := os.Stat(exe)
	if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		t.Fatalf("runtime %s: %s=%q is not an executable file (%v): run scripts/sdk-setup.sh again", rt.name, rt.env, exe, err)
	}
	return exe
}
