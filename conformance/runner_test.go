package conformance

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runnerProcess is a runner started by the driver. It runs in a process
// group of its own, so that killing it kills whatever it started too.
type runnerProcess struct {
	cmd    *exec.Cmd
	stderr *tailBuffer
	ready  chan struct{}
	// exited is closed once the process has exited; waitErr is then its
	// status.
	exited  chan struct{}
	waitErr error
}

// startRunner starts exe with the environment plus env (which wins). The
// runner is killed, with its process group, when the test ends; when the
// test failed its stderr is logged.
func startRunner(t *testing.T, exe string, env map[string]string) *runnerProcess {
	t.Helper()
	cmd := exec.Command(exe)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r := &runnerProcess{cmd: cmd, stderr: &tailBuffer{max: 64 << 10}, ready: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stderr = r.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the runner %s: %v", exe, err)
	}
	var readDone sync.WaitGroup
	readDone.Go(func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				once.Do(func() { close(r.ready) })
			}
		}
	})
	go func() {
		// Wait closes stdout only once it has been read to its end.
		readDone.Wait()
		r.waitErr = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		r.kill()
		<-r.exited
		if t.Failed() {
			t.Logf("the runner's stderr (its last %d KiB at most):\n%s", r.stderr.max>>10, r.stderr.String())
		}
	})
	return r
}

// waitReady waits for the runner's "ready" line.
func (r *runnerProcess) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-r.ready:
	case <-r.exited:
		t.Fatalf("the runner exited (%v) before printing ready", r.waitErr)
	case <-time.After(timeout):
		t.Fatalf("the runner did not print ready within %s", timeout)
	}
}

// signal sends sig to the runner itself (not its group): the runner
// contract's SIGTERM goes to the process the driver started, which should
// exec the runtime rather than wrap it.
func (r *runnerProcess) signal(sig syscall.Signal) error {
	return r.cmd.Process.Signal(sig)
}

// kill kills the runner's whole process group.
func (r *runnerProcess) kill() {
	select {
	case <-r.exited:
	default:
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// waitExit waits for the runner to exit and returns its exit code (-1
// when a signal killed it).
func (r *runnerProcess) waitExit(timeout time.Duration) (int, error) {
	select {
	case <-r.exited:
	case <-time.After(timeout):
		return 0, errors.New("the runner is still running")
	}
	if r.waitErr == nil {
		return 0, nil
	}
	if exit, ok := errors.AsType[*exec.ExitError](r.waitErr); ok {
		return exit.ExitCode(), nil
	}
	return 0, r.waitErr
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
