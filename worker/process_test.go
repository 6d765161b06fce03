package worker_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/testbin"

	. "github.com/convo-dev/convo/worker"
)

// buildWorker builds cmd/worker, once for every test (testbin.Build: with
// the race detector when the tests have it).
func buildWorker(t *testing.T) string {
	t.Helper()
	return testbin.Build(t, "github.com/convo-dev/convo/cmd/worker")
}

// process is a running cmd/worker.
type process struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	log strings.Builder
}

// startWorker runs the worker binary against dsn with args, and returns
// once it logged that its workers listen. The process is killed when the
// test ends.
func startWorker(t *testing.T, bin, dsn string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...)}
	p.cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "CONVO_LOG_LEVEL=info")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("worker %d log:\n%s", p.cmd.Process.Pid, p.output())
		}
	})
	ready := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if strings.Contains(sc.Text(), "workers started") {
				once.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = p.cmd.Wait()
	}()
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("worker exited before it was ready:\n%s", p.output())
	case <-time.After(20 * time.Second):
		t.Fatalf("worker not ready after 20s:\n%s", p.output())
	}
	return p
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// TestProcesses runs cmd/worker as separate processes.
func TestProcesses(t *testing.T) {
	t.Parallel()

	t.Run("TwoProcessesRunFiftyPromptsOnceEach", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		bin := buildWorker(t)
		args := []string{"--workers", "3", "--demo-tokens-per-second", "-1", "--poll-interval", "500ms"}
		startWorker(t, bin, tb.dsn, append(args, "--worker-name", "alpha")...)
		startWorker(t, bin, tb.dsn, append(args, "--worker-name", "beta")...)

		var prompts []uuid.UUID
		for i := range 50 {
			prompts = append(prompts, tb.send(t, uuid.Nil, "What is "+strings.Repeat("2 * ", i%7)+"3?", `{}`).promptID)
		}
		eventually(t, 30*time.Second, "every prompt to finish", func() bool {
			var open int
			if err := tb.db.QueryRow(context.Background(),
				`SELECT count(*) FROM convo.prompts WHERE status IN ('queued', 'running')`).Scan(&open); err != nil {
				t.Fatal(err)
			}
			return open == 0
		})

		byProcess := map[string]int{}
		rows, err := tb.db.Query(context.Background(), `
			SELECT p.id, p.status, p.attempts, p.worker,
			       (SELECT count(*) FROM convo.events e WHERE e.prompt_id = p.id AND e.kind = 'promptStarted'),
			       (SELECT count(*) FROM convo.blocks b WHERE b.prompt_id = p.id AND b.block_type = 'reasoning')
			  FROM convo.prompts p`)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var id uuid.UUID
			var status, worker string
			var attempts, starts, reasonings int
			if err := rows.Scan(&id, &status, &attempts, &worker, &starts, &reasonings); err != nil {
				t.Fatal(err)
			}
			n++
			if status != "completed" || attempts != 1 || starts != 1 || reasonings != 1 {
				t.Errorf("prompt %s: %s after %d claims, %d starts, %d reasoning blocks", id, status, attempts, starts, reasonings)
			}
			byProcess[strings.Split(worker, "/")[0]]++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if n != len(prompts) {
			t.Errorf("%d prompts, want %d", n, len(prompts))
		}
		if byProcess["alpha"] == 0 || byProcess["beta"] == 0 || byProcess["alpha"]+byProcess["beta"] != len(prompts) {
			t.Errorf("prompts per process: %v", byProcess)
		}
		t.Logf("prompts per process: %v", byProcess)
	})

	t.Run("KilledWorkersPromptFailsAfterTheLease", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		bin := buildWorker(t)
		proc := startWorker(t, bin, tb.dsn, "--workers", "1", "--worker-name", "doomed",
			"--lease-seconds", "2", "--demo-tokens-per-second", "20")
		s := tb.send(t, uuid.Nil, "What is 40 + 2?", `{}`)

		// Mid-reply: the reasoning block is streaming.
		eventually(t, 20*time.Second, "the reply to stream", func() bool {
			for _, e := range tb.events(t, s.conversationID) {
				if e.Kind == conversation.EventBlockDelta {
					return true
				}
			}
			return false
		})
		if err := proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		if st, _ := tb.prompt(t, s.promptID); st != "running" {
			t.Fatalf("status %s right after the kill", st)
		}

		// Any worker's claim reaps expired leases: here, an in-process one.
		tb.start(t, Config{PollInterval: 100 * time.Millisecond})
		var errText string
		eventually(t, 10*time.Second, "the prompt to fail", func() bool {
			var st string
			st, errText = tb.prompt(t, s.promptID)
			return st == "failed"
		})
		after := time.Since(killed)
		if errText != "lease expired: worker doomed stopped heartbeating" {
			t.Errorf("error %q", errText)
		}
		if after > 4*time.Second {
			t.Errorf("failed %s after the kill; the lease is 2s", after)
		}
		t.Logf("failed %s after the kill", after)

		// Failed, not run again: one start, and the partial reply stays.
		starts := 0
		for _, e := range tb.events(t, s.conversationID) {
			if e.Kind == conversation.EventPromptStarted {
				starts++
			}
		}
		m := tb.message(t, s)
		if starts != 1 || m.Status != conversation.MessageFailed || len(m.Blocks) == 0 || m.Blocks[0].Content == "" {
			t.Errorf("%d starts, message %s, blocks %+v", starts, m.Status, m.Blocks)
		}
	})
}
