package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// NeedNode returns the path of Node.js, failing the test, saying how to get
// them, when Node.js or web/node_modules/<module> (an npm package a
// verifier imports) is missing.
func NeedNode(t testing.TB, module string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("Node.js is needed to run the protocol verifiers (apt-get install nodejs): %v", err)
	}
	if _, err := os.Stat(filepath.Join(webDir(t), "node_modules", module, "package.json")); err != nil {
		t.Fatalf("web/node_modules has no %s: run `npm install --prefix web` (scripts/test.sh does): %v", module, err)
	}
	return node
}

// RunVerifier runs the Node.js script web/<script>, which judges recorded
// streams with a protocol's own npm package module, with env added to its
// environment, and decodes the JSON report it prints into report. It
// fails the test when the script cannot run (NeedNode) or fails, or its
// report is not JSON.
func RunVerifier(t testing.TB, script, module string, report any, env ...string) {
	t.Helper()
	node := NeedNode(t, module)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(webDir(t), script))
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), report); err != nil {
		t.Fatalf("%s report: %v\n%s\n%s", script, err, stdout.String(), stderr.String())
	}
}

// Deref is a verifier report's error text: *s, or "ok" when s is nil.
func Deref(s *string) string {
	if s == nil {
		return "ok"
	}
	return *s
}

// webDir is the repository's web directory: beside go.mod, in the first
// directory up from the test's that has one.
func webDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "web")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
