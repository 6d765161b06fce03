// Command testreport reads `go test -json` on stdin and prints what plain
// `go test` would (a line per package, and the output of every test that
// failed), then the slowest tests and packages, so that a run's time can
// be read from its log:
//
//	go test -json ./... | go run ./internal/testreport
//
// It exits 1 when a test or a package failed, or when the input ended
// before every package it saw had ended (go test itself was killed).
// Output of tests that pass is dropped, as plain go test drops it.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// event is one line of test2json's output (go doc test2json), or of go
// test's build output ("build-output", with ImportPath).
type event struct {
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string
}

// slowest is how many tests and packages the report lists.
const slowest = 15

func main() {
	r := newReport(os.Stdout)
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if !r.summary() {
		os.Exit(1)
	}
}

// timing is one finished test or package.
type timing struct {
	pkg, test string
	elapsed   time.Duration
}

type report struct {
	out io.Writer
	// output holds each running test's lines ("" is the package's own),
	// keyed by package then test: printed if it fails, dropped if not.
	output   map[string]map[string][]string
	tests    []timing
	packages []timing
	open     map[string]bool // packages that started and have not ended
	failed   bool
}

func newReport(out io.Writer) *report {
	return &report{out: out, output: map[string]map[string][]string{}, open: map[string]bool{}}
}

func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			// Not test2json's (a build error's text, say): pass it on.
			fmt.Fprintln(r.out, sc.Text())
			continue
		}
		r.handle(e)
	}
	return sc.Err()
}

func (r *report) handle(e event) {
	if r.output[e.Package] == nil {
		r.output[e.Package] = map[string][]string{}
	}
	lines := r.output[e.Package]
	elapsed := time.Duration(e.Elapsed * float64(time.Second))
	switch e.Action {
	case "build-output":
		io.WriteString(r.out, e.Output)
	case "build-fail":
		r.failed = true
	case "start":
		r.open[e.Package] = true
	case "output":
		// The run's progress lines, and the "PASS" of every package, which
		// plain go test does not print.
		if strings.HasPrefix(e.Output, "=== ") || (e.Test == "" && e.Output == "PASS\n") {
			return
		}
		lines[e.Test] = append(lines[e.Test], e.Output)
	case "pass", "skip":
		if e.Test == "" {
			r.endPackage(e, elapsed)
			return
		}
		if !strings.Contains(e.Test, "/") && e.Action == "pass" {
			r.tests = append(r.tests, timing{e.Package, e.Test, elapsed})
		}
		delete(lines, e.Test)
	case "fail":
		r.failed = true
		if e.Test == "" {
			r.endPackage(e, elapsed)
			return
		}
		if !strings.Contains(e.Test, "/") {
			r.tests = append(r.tests, timing{e.Package, e.Test, elapsed})
			// A subtest's lines are printed with its parent's failure,
			// after the parent's own.
			var names []string
			for name := range lines {
				if name == e.Test || strings.HasPrefix(name, e.Test+"/") {
					names = append(names, name)
				}
			}
			slices.Sort(names)
			for _, name := range names {
				r.print(lines[name])
				delete(lines, name)
			}
		}
	}
}

// endPackage prints the package's line as go test does ("ok", "FAIL", or
// "?" with no test files), preceded on failure by every line it kept.
func (r *report) endPackage(e event, elapsed time.Duration) {
	delete(r.open, e.Package)
	lines := r.output[e.Package]
	delete(r.output, e.Package)
	if e.Action == "fail" {
		names := make([]string, 0, len(lines))
		for name := range lines {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			r.print(lines[name])
		}
		// The package's own lines end with its "FAIL" line.
		r.packages = append(r.packages, timing{pkg: e.Package, elapsed: elapsed})
		return
	}
	// The package's own lines end with its "ok" or "?" line.
	r.print(lines[""])
	if e.Action == "pass" {
		r.packages = append(r.packages, timing{pkg: e.Package, elapsed: elapsed})
	}
}

func (r *report) print(lines []string) {
	for _, l := range lines {
		io.WriteString(r.out, l)
	}
}

// summary prints the slowest tests and packages and says whether the run
// passed.
func (r *report) summary() bool {
	byTime := func(a, b timing) int { return cmp.Compare(b.elapsed, a.elapsed) }
	slices.SortFunc(r.tests, byTime)
	slices.SortFunc(r.packages, byTime)
	fmt.Fprintf(r.out, "\n== the %d slowest tests (wall time, tests of a package run side by side)\n", min(slowest, len(r.tests)))
	for _, t := range r.tests[:min(slowest, len(r.tests))] {
		fmt.Fprintf(r.out, "%8s  %s %s\n", t.elapsed.Round(100*time.Millisecond), strings.TrimPrefix(t.pkg, modulePrefix(t.pkg)), t.test)
	}
	fmt.Fprintf(r.out, "== the %d slowest packages\n", min(slowest, len(r.packages)))
	for _, p := range r.packages[:min(slowest, len(r.packages))] {
		fmt.Fprintf(r.out, "%8s  %s\n", p.elapsed.Round(100*time.Millisecond), p.pkg)
	}
	for pkg := range r.open {
		fmt.Fprintf(r.out, "FAIL\t%s: go test ended before the package did\n", pkg)
		r.failed = true
	}
	return !r.failed
}

// modulePrefix is the part of a package path up to the module's root,
// left out of the table of tests to keep its lines short.
func modulePrefix(pkg string) string {
	if i := strings.Index(pkg, "/convo/"); i >= 0 {
		return pkg[:i+len("/convo/")]
	}
	return ""
}
