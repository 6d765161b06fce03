package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Remove()
	os.Exit(code)
}

// TestBuildOnceAlike: every test asking for a command gets the one file,
// built with the race detector exactly when this test binary has it, and
// runnable by everyone.
func TestBuildOnceAlike(t *testing.T) {
	t.Parallel()
	const pkg = "github.com/convo-dev/convo/internal/testbin/testdata/hello"
	var wg sync.WaitGroup
	bins := make([]string, 4)
	for i := range bins {
		wg.Go(func() { bins[i] = Build(t, pkg) })
	}
	wg.Wait()
	for _, b := range bins[1:] {
		if b != bins[0] {
			t.Fatalf("two builds of one command: %s and %s", bins[0], b)
		}
	}
	info, err := os.Stat(bins[0])
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm()&0o005 != 0o005 {
		t.Errorf("%s is %v: others cannot run it", bins[0], info.Mode())
	}
	if dinfo, err := os.Stat(filepath.Dir(bins[0])); err != nil || dinfo.Mode().Perm()&0o005 != 0o005 {
		t.Errorf("the directory of %s cannot be entered by others (%v, %v)", bins[0], dinfo, err)
	}
	// `go version -m` reads the build settings linked into the binary.
	out, err := exec.Command("go", "version", "-m", bins[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, out)
	}
	if got := strings.Contains(string(out), "-race=true"); got != Race {
		t.Errorf("built with the race detector: %v, want %v (the test binary's):\n%s", got, Race, out)
	}
	run, err := exec.Command(bins[0]).Output()
	if err != nil || string(run) != "hello\n" {
		t.Errorf("running it: %q, %v", run, err)
	}
}

// TestBuildFailureFailsTheTest: a command that does not build fails the
// test with go build's output.
func TestBuildFailureFailsTheTest(t *testing.T) {
	t.Parallel()
	var ft fakeT
	done := make(chan struct{})
	go func() {
		defer close(done)
		Build(&ft, "github.com/convo-dev/convo/internal/testbin/testdata/nosuch")
	}()
	<-done
	if !ft.failed || !strings.Contains(ft.msg, "testdata/nosuch") {
		t.Errorf("failed %v, message %q; want a failure naming the package", ft.failed, ft.msg)
	}
}

// fakeT records a Fatal, which ends its goroutine as testing's does.
type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatal(args ...any) {
	f.failed = true
	for _, a := range args {
		if e, ok := a.(error); ok {
			f.msg += e.Error()
		}
	}
	runtimeGoexit()
}

var runtimeGoexit = runtime.Goexit // Fatal must not return
