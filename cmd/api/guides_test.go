package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
)

// The worker guides mark the code blocks a new user runs, in order, with
// an HTML comment on the line before the block (invisible on GitHub):
//
//	<!-- guide-test: NAME [KIND] -->
//
// KIND is one of
//
//	(none)     shell commands, run in bash
//	node       the commands that install Node.js 22, for a machine whose
//	           node is older (the test runs them once, into .cache/guides)
//	file=PATH  a file to save at PATH (~/… is under the guide's home)
//	server     `[NAME=VALUE …] make run`: how to start convo for the guide
//	run        the command that starts the worker; the placeholder
//	           guidePlaceholder stands for the worker URL make run prints
//
// TestGuides runs each guide from its page, so that page and test cannot
// drift apart.
var guideMarkRE = regexp.MustCompile(`^<!-- guide-test: ([a-z0-9-]+)(?: (\S+))? -->$`)

// guidePlaceholder is how the guides write the URL `make run` printed.
const guidePlaceholder = "<the worker_database_url make run printed>"

// guideStartedLine is what the test's script prints once the guide's
// setup is done and its worker starts.
const guideStartedLine = "guide-test: the setup is done, starting the worker"

// guides are the runnable guides: the page that holds each, and the reply
// its first worker streams to guideMessage.
var guides = []guideSpec{
	{"typescript", "docs/workers-typescript.md", func(msg string) string { return "You said: " + msg }, true},
	{"python", "docs/workers-python.md", func(msg string) string { return "You said: " + msg }, true},
	{"readme-python", "README.md", func(string) string { return "Hello from a Python worker, asked with" }, false},
}

// guideSpec is one runnable guide.
type guideSpec struct {
	name, doc string
	want      func(msg string) string // the reply's text (exact), or its start
	exact     bool
}

const guideMessage = "Which bakery opens first on Sunday?"

// guideStep is one marked code block.
type guideStep struct {
	kind string // "", "node", "file", "server" or "run"
	path string // of a file step
	text string
	line int // of the block's first line in the page
}

// guideSteps reads every guide-test block of the README and docs/*.md,
// by guide name, in page order. A marker that is not followed by a fenced
// block, or with an unknown kind, fails the test.
func guideSteps(t *testing.T) map[string][]guideStep {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append([]string{filepath.Join(repoRoot, "README.md")}, paths...)
	steps := map[string][]guideStep{}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		lines := strings.Split(string(src), "\n")
		for i := 0; i < len(lines); i++ {
			m := guideMarkRE.FindStringSubmatch(strings.TrimSpace(lines[i]))
			if m == nil {
				if strings.Contains(lines[i], "guide-test:") && strings.HasPrefix(strings.TrimSpace(lines[i]), "<!--") {
					t.Fatalf("%s:%d: a guide-test marker the test cannot read: %q", rel, i+1, lines[i])
				}
				continue
			}
			step := guideStep{kind: m[2]}
			if path, ok := strings.CutPrefix(m[2], "file="); ok {
				step.kind, step.path = "file", path
			}
			if !slices.Contains([]string{"", "node", "file", "server", "run"}, step.kind) {
				t.Fatalf("%s:%d: guide-test marker of unknown kind %q", rel, i+1, m[2])
			}
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
				t.Fatalf("%s:%d: a guide-test marker must be right above a fenced code block", rel, i+1)
			}
			start := i + 2
			end := start
			for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
				end++
			}
			if end == len(lines) {
				t.Fatalf("%s:%d: the code block never closes", rel, i+2)
			}
			step.text = strings.Join(lines[start:end], "\n") + "\n"
			step.line = start + 1
			steps[m[1]] = append(steps[m[1]], step)
			i = end
		}
	}
	for name := range steps {
		if !slices.ContainsFunc(guides, func(g guideSpec) bool { return g.name == name }) {
			t.Errorf("guide-test blocks of %q, which TestGuides does not know", name)
		}
	}
	return steps
}

// TestGuides runs each worker guide as a new user would, from its page:
// convo started as its server block says (on a private database), the
// guide's commands run in bash in a home directory of their own (with
// ~/convo this checkout), its files saved where it says, its worker
// started with the worker URL; then a message sent through the API must
// get the guide's reply, streamed in several deltas, and completed.
//
// It needs what a fresh machine has after scripts/test.sh's setup: the
// npm registry (the TypeScript guide installs from it; Node 22 too, when
// node is older; downloads are cached in .cache/npm), and Debian's
// /usr/bin/python3 with psycopg, venv, setuptools and wheel.
func TestGuides(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("the guides' commands run in bash: %v", err)
	}
	all := guideSteps(t)
	for _, g := range guides {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			steps := all[g.name]
			if len(steps) == 0 {
				t.Fatalf("%s has no guide-test blocks of %q", g.doc, g.name)
			}
			runGuide(t, g.doc, steps, g.want(guideMessage), g.exact)
		})
	}
}

// runGuide runs one guide's steps and checks its worker's reply.
func runGuide(t *testing.T, doc string, steps []guideStep, want string, exact bool) {
	repo, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.Symlink(repo, filepath.Join(home, "convo")); err != nil {
		t.Fatal(err)
	}
	env := guideEnv(home, repo)

	var serverEnv map[string]string
	var script strings.Builder
	// -x: the output shows each command before its own output, so that
	// a failure shows which line of the page failed.
	script.WriteString("set -euxo pipefail\n")
	ran := false
	var runStep string
	for _, s := range steps {
		where := fmt.Sprintf("%s:%d", doc, s.line)
		if ran && s.kind != "server" {
			t.Fatalf("%s: a step after the run block, which runs the worker until the test ends", where)
		}
		switch s.kind {
		case "node":
			env = withNode22(t, env, repo, s, where)
		case "server":
			if serverEnv != nil {
				t.Fatalf("%s: a second server block", where)
			}
			serverEnv = parseMakeRun(t, s.text, where)
		case "file":
			path, ok := strings.CutPrefix(s.path, "~/")
			if !ok {
				t.Fatalf("%s: file=%s: the guides save files under ~/", where, s.path)
			}
			const eof = "GUIDE_TEST_EOF"
			if strings.Contains(s.text, eof) {
				t.Fatalf("%s: the file holds %s", where, eof)
			}
			fmt.Fprintf(&script, "# %s\ncat > \"$HOME\"/%q <<'%s'\n%s%s\n", where, path, eof, s.text, eof)
		case "run":
			if ran {
				t.Fatalf("%s: a second run block", where)
			}
			ran = true
			if !strings.Contains(s.text, guidePlaceholder) {
				t.Fatalf("%s: the run block does not use the worker URL as %q", where, guidePlaceholder)
			}
			fmt.Fprintf(&script, "echo %q\n# %s\n", guideStartedLine, where)
			runStep = s.text
		default:
			fmt.Fprintf(&script, "# %s\n%s", where, s.text)
		}
	}
	if serverEnv == nil || !ran {
		t.Fatalf("%s: the guide needs a server block and a run block (has server: %v, run: %v)", doc, serverEnv != nil, ran)
	}

	dsn := pgtest.DSN(t)
	serverEnv["DATABASE_URL"] = dsn
	m := startMain(t, serverEnv)
	// A login of the worker role, as make run prints for workers, pasted
	// where the guide says.
	workerURL := pgtest.WorkerDSN(t, dsn)
	if strings.ContainsAny(workerURL, "'\\") {
		t.Fatalf("the worker URL %q would not paste between single quotes", workerURL)
	}
	text := script.String() + strings.ReplaceAll(runStep, guidePlaceholder, workerURL)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.Command("bash", "-c", text)
	cmd.Dir = home
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &guideOutput{started: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, out
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { stopGroup(t, cmd, exited) })

	select {
	case <-out.started:
		t.Logf("%s: the setup took %v", doc, time.Since(began).Round(time.Second))
	case err := <-exited:
		exited <- err // for stopGroup
		t.Fatalf("%s: the guide's commands failed (%v) before its worker started:\n%s", doc, err, out.tail())
	case <-ctx.Done():
		t.Fatalf("%s: the guide's setup took over 8 minutes:\n%s", doc, out.tail())
	}

	// The user sends a message; the worker, started or starting, answers.
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	rctx, rcancel := context.WithTimeout(ctx, 90*time.Second)
	defer rcancel()
	sent, err := client.SendMessage(rctx, connect.NewRequest(&convov1.SendMessageRequest{Text: guideMessage}))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := client.StreamConversation(rctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: sent.Msg.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	// The stream ends when the worker process does: a worker that dies
	// fails the test at once, with its output.
	go func() {
		select {
		case err := <-exited:
			exited <- err
			rcancel()
		case <-rctx.Done():
		}
	}()
	var deltas []string
	completed := false
	for !completed && stream.Receive() {
		e := stream.Msg().GetEvent()
		if d := e.GetBlockDelta(); d != nil {
			deltas = append(deltas, d.Content)
		}
		if f := e.GetPromptFailed(); f != nil {
			t.Fatalf("%s: the reply failed: %s\nthe guide's output:\n%s", doc, f.Error, out.tail())
		}
		completed = e.GetPromptCompleted() != nil
	}
	if !completed {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("%s: the guide's worker exited (%v) before the reply completed (deltas so far %q); the guide's output:\n%s",
				doc, err, deltas, out.tail())
		default:
		}
		t.Fatalf("%s: no completed reply within 90 s (the stream: %v; deltas so far %q); the guide's output:\n%s",
			doc, stream.Err(), deltas, out.tail())
	}
	got, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.Msg.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	msgs := got.Msg.Messages
	if len(msgs) != 2 || msgs[1].Status != "completed" || len(msgs[1].Blocks) != 1 || msgs[1].Blocks[0].BlockType != "text" {
		t.Fatalf("%s: the conversation is %v, want the message and a completed reply of one text block", doc, msgs)
	}
	reply := msgs[1].Blocks[0].Content
	if exact && strings.TrimSpace(reply) != want || !exact && !strings.HasPrefix(reply, want) {
		t.Errorf("%s: the reply is %q, want %q", doc, reply, want)
	}
	if strings.Join(deltas, "") != reply {
		t.Errorf("%s: the deltas %q do not make the reply %q", doc, deltas, reply)
	}
	// Streamed: word by word, not the whole reply at its end.
	if len(deltas) < 4 {
		t.Errorf("%s: the reply came in %d deltas %q, want it streamed in 4 or more", doc, len(deltas), deltas)
	}
	t.Logf("%s: the reply streamed in %d deltas: %q", doc, len(deltas), reply)
}

// guideEnv is the environment of a guide's commands: this process's,
// with home as HOME, and npm's downloads cached in the checkout's .cache
// (so that a second run downloads nothing).
func guideEnv(home, repo string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		// The guide sets DATABASE_URL itself; npm must not take another
		// cache or prefix from the caller.
		if k == "HOME" || k == "DATABASE_URL" || strings.HasPrefix(strings.ToLower(k), "npm_config_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home,
		"npm_config_cache="+filepath.Join(repo, ".cache", "npm"), "npm_config_prefer_offline=true",
		"npm_config_audit=false", "npm_config_fund=false", "npm_config_update_notifier=false")
}

// withNode22 returns env with a Node.js of version 22 or later first on
// PATH. When the machine's node is older, it runs the guide's node block
// (which installs Node 22 from the npm registry into ~/node22) once, with
// .cache/guides/node as its home, and reuses that Node after.
func withNode22(t *testing.T, env []string, repo string, s guideStep, where string) []string {
	t.Helper()
	if major, _ := nodeMajor(env); major >= 22 {
		return env
	}
	nodeHome := filepath.Join(repo, ".cache", "guides", "node")
	bin := filepath.Join(nodeHome, "node22", "node_modules", ".bin")
	withBin := func(env []string) []string {
		out := slices.Clone(env)
		for i, kv := range out {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				out[i] = "PATH=" + bin + string(os.PathListSeparator) + v
			}
		}
		return out
	}
	if major, _ := nodeMajor(withBin(env)); major < 22 {
		if err := os.MkdirAll(nodeHome, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+s.text)
		cmd.Dir = nodeHome
		cmd.Env = append(slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }), "HOME="+nodeHome)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: the commands that install Node 22 failed: %v\n%s", where, err, out)
		}
	}
	env = withBin(env)
	if major, err := nodeMajor(env); major < 22 {
		t.Fatalf("%s: after the guide's Node install, node on PATH is version %d (%v), want 22 or later", where, major, err)
	}
	return env
}

// nodeMajor is the major version of the node that env's PATH finds.
func nodeMajor(env []string) (int, error) {
	cmd := exec.Command("bash", "-c", "node --version")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("node --version: %w", err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _, _ := strings.Cut(v, ".")
	return strconv.Atoi(major)
}

// parseMakeRun reads a server block, `[NAME=VALUE …] make run [# …]`, as
// the settings to start convo with.
func parseMakeRun(t *testing.T, text, where string) map[string]string {
	t.Helper()
	env := map[string]string{}
	var lines []string
	for line := range strings.Lines(text) {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%s: a server block is one `[NAME=VALUE …] make run` line, not %q", where, lines)
	}
	fields := strings.Fields(lines[0])
	if len(fields) < 2 || fields[len(fields)-2] != "make" || fields[len(fields)-1] != "run" {
		t.Fatalf("%s: a server block is `[NAME=VALUE …] make run`, not %q", where, lines[0])
	}
	for _, f := range fields[:len(fields)-2] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || !strings.HasPrefix(k, "CONVO_") {
			t.Fatalf("%s: %q is not a CONVO_ setting", where, f)
		}
		env[k] = v
	}
	return env
}

// stopGroup ends the guide's processes: SIGTERM to the group (the worker
// drains), then SIGKILL after 10 s.
func stopGroup(t *testing.T, cmd *exec.Cmd, exited chan error) {
	pgid := cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM) //nolint:errcheck
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Logf("the guide's processes did not stop within 10 s of SIGTERM: killed")
		syscall.Kill(-pgid, syscall.SIGKILL) //nolint:errcheck
		<-exited
	}
	// Whatever the worker left running in its group.
	syscall.Kill(-pgid, syscall.SIGKILL) //nolint:errcheck
}

// guideOutput keeps the guide's output and closes started when the
// script prints guideStartedLine.
type guideOutput struct {
	mu      sync.Mutex
	buf     strings.Builder
	line    strings.Builder
	started chan struct{}
	once    sync.Once
}

func (o *guideOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	for _, b := range p {
		if b != '\n' {
			o.line.WriteByte(b)
			continue
		}
		if o.line.String() == guideStartedLine {
			o.once.Do(func() { close(o.started) })
		}
		o.line.Reset()
	}
	return len(p), nil
}

// tail is the last 16 KB of the output.
func (o *guideOutput) tail() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.buf.String()
	if len(s) > 16<<10 {
		s = "…" + s[len(s)-16<<10:]
	}
	return s
}

var _ io.Writer = (*guideOutput)(nil)
