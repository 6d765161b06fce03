package pgembed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// server is one run of the postmaster, from spawn to exit.
type server struct {
	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error         // valid after done

	ready    atomic.Bool // it answered queries
	stopping atomic.Bool // its exit is expected
}

// spawn starts cmd and reaps it in the background.
//
// The kernel sends the parent-death signal (SysProcAttr.Pdeathsig) when the
// thread that forked the child exits, not when the process does. The Go
// runtime may end a thread whenever a goroutine that locked it returns, so
// the fork happens on a goroutine that locks its thread and stays on it,
// blocked in Wait, for as long as the child lives: the signal then fires
// exactly when this process dies.
func spawn(cmd *exec.Cmd, logFile *os.File) (*server, error) {
	s := &server{cmd: cmd, logFile: logFile, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: when this goroutine returns, the child is gone
		// and the runtime may retire the thread.
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.waitErr = cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	if err := <-started; err != nil {
		logFile.Close()
		return nil, err
	}
	return s, nil
}

// exited reports whether the process has ended.
func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stopGrace is how long each escalation step waits before the next, harder
// signal once the caller's context has ended.
const stopGrace = 5 * time.Second

// stop sends sig (SIGINT: fast shutdown, SIGQUIT: immediate shutdown) and
// waits for the process to exit. If ctx ends first it escalates to SIGQUIT
// and then SIGKILL, and returns ctx's error once the process is gone.
func (s *server) stop(ctx context.Context, sig syscall.Signal) error {
	s.stopping.Store(true)
	_ = s.cmd.Process.Signal(sig) // fails only when it already exited
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
	}
	for _, next := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGKILL} {
		if next == sig {
			continue
		}
		_ = s.cmd.Process.Signal(next)
		select {
		case <-s.done:
			return fmt.Errorf("shutdown interrupted, sent %v: %w", next, ctx.Err())
		case <-time.After(stopGrace):
		}
	}
	<-s.done // SIGKILL cannot be refused
	return fmt.Errorf("shutdown interrupted, sent SIGKILL: %w", ctx.Err())
}

// logTail returns the last lines the server wrote to the log file at path
// after offset from, for error messages.
func logTail(path string, from int64) string {
	const maxBytes, maxLines = 4096, 20
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil {
		from = max(from, fi.Size()-maxBytes)
	}
	_, _ = f.Seek(from, io.SeekStart)
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return strings.Join(lines, "\n")
}

// errPortInUse marks a start that failed because the TCP port was taken.
var errPortInUse = errors.New("port already in use")

// dataDirInUse recognises postgres's refusal to start while processes of
// an earlier server on the same data directory are still alive.
func dataDirInUse(tail string) bool {
	return strings.Contains(tail, "pre-existing shared memory block") ||
		strings.Contains(tail, "lock file \"postmaster.pid\" already exists")
}

// portInUse recognises postgres's complaint about a taken port in its log.
func portInUse(tail string) bool {
	return strings.Contains(tail, "could not bind IPv4 address") ||
		strings.Contains(tail, "Address already in use") ||
		strings.Contains(tail, "could not create any TCP/IP sockets")
}
