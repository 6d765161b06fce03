package main

import (
	"strings"
	"testing"
)

// run is go test -json's output for a package with a passing test that
// logs, a failing test with a subtest, a package that failed to build,
// and a package whose run was cut off.
const run = `{"Action":"start","Package":"m/a"}
{"Action":"run","Package":"m/a","Test":"TestQuiet"}
{"Action":"output","Package":"m/a","Test":"TestQuiet","Output":"=== RUN   TestQuiet\n"}
{"Action":"output","Package":"m/a","Test":"TestQuiet","Output":"    a_test.go:3: quiet\n"}
{"Action":"pass","Package":"m/a","Test":"TestQuiet","Elapsed":2.5}
{"Action":"run","Package":"m/a","Test":"TestLoud"}
{"Action":"run","Package":"m/a","Test":"TestLoud/sub"}
{"Action":"output","Package":"m/a","Test":"TestLoud/sub","Output":"    a_test.go:9: boom\n"}
{"Action":"output","Package":"m/a","Test":"TestLoud/sub","Output":"--- FAIL: TestLoud/sub (0.00s)\n"}
{"Action":"fail","Package":"m/a","Test":"TestLoud/sub","Elapsed":0}
{"Action":"output","Package":"m/a","Test":"TestLoud","Output":"--- FAIL: TestLoud (0.50s)\n"}
{"Action":"fail","Package":"m/a","Test":"TestLoud","Elapsed":0.5}
{"Action":"output","Package":"m/a","Output":"FAIL\n"}
{"Action":"output","Package":"m/a","Output":"FAIL\tm/a\t3.1s\n"}
{"Action":"fail","Package":"m/a","Elapsed":3.1}
{"ImportPath":"m/b [m/b.test]","Action":"build-output","Output":"b_test.go:3:31: undefined: nope\n"}
{"ImportPath":"m/b [m/b.test]","Action":"build-fail"}
{"Action":"start","Package":"m/c"}
{"Action":"run","Package":"m/c","Test":"TestOK"}
{"Action":"pass","Package":"m/c","Test":"TestOK","Elapsed":1}
{"Action":"output","Package":"m/c","Output":"PASS\n"}
{"Action":"output","Package":"m/c","Output":"ok  \tm/c\t1.2s\n"}
{"Action":"pass","Package":"m/c","Elapsed":1.2}
{"Action":"start","Package":"m/d"}
`

func TestReportPrintsFailuresAndTheSlowest(t *testing.T) {
	var out strings.Builder
	r := newReport(&out)
	if err := r.read(strings.NewReader(run)); err != nil {
		t.Fatal(err)
	}
	if r.summary() {
		t.Error("the run passed; want it failed")
	}
	got := out.String()
	for _, want := range []string{
		"--- FAIL: TestLoud (0.50s)\n    a_test.go:9: boom\n--- FAIL: TestLoud/sub", // the parent, then its subtest
		"FAIL\tm/a\t3.1s\n",
		"b_test.go:3:31: undefined: nope\n",
		"ok  \tm/c\t1.2s\n",
		"FAIL\tm/d: go test ended before the package did\n",
		"== the 3 slowest tests",
		"    2.5s  m/a TestQuiet\n      1s  m/c TestOK\n   500ms  m/a TestLoud\n",
		"== the 2 slowest packages\n    3.1s  m/a\n    1.2s  m/c\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	for _, never := range []string{"quiet", "=== RUN", "PASS\n"} {
		if strings.Contains(got, never) {
			t.Errorf("the report shows %q, which plain go test would not:\n%s", never, got)
		}
	}
}

func TestReportPassesAPassingRun(t *testing.T) {
	var out strings.Builder
	r := newReport(&out)
	passing := `{"Action":"start","Package":"m/c"}
{"Action":"output","Package":"m/c","Output":"ok  \tm/c\t1.2s\n"}
{"Action":"pass","Package":"m/c","Elapsed":1.2}
`
	if err := r.read(strings.NewReader(passing)); err != nil {
		t.Fatal(err)
	}
	if !r.summary() {
		t.Errorf("a passing run failed:\n%s", out.String())
	}
}
