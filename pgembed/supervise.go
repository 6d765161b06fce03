package pgembed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The supervisor's wait before each attempt to start the server again: it
// doubles after every failed attempt, from the first to the last.
const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// supervise starts the server again whenever it exits without Stop or
// Restart asking (Options.Supervise), until ctx ends (Stop ends it). It
// closes done when it returns.
func (c *Cluster) supervise(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	for {
		c.mu.Lock()
		srv := c.srv
		c.mu.Unlock()
		if srv == nil {
			return // stopped
		}
		select {
		case <-ctx.Done():
			return
		case <-srv.done:
		}
		if !c.restartDead(ctx, srv) {
			return
		}
	}
}

// restartDead starts the server again after dead exited, with a growing
// backoff while starts fail. It returns false when ctx ended first.
//
// Restart and Stop mark the server they stop and replace c.srv while they
// hold c.mu, so dead, still in c.srv once c.mu is free, exited on its own.
func (c *Cluster) restartDead(ctx context.Context, dead *server) bool {
	c.mu.Lock()
	replaced := c.srv != dead
	c.mu.Unlock()
	if replaced {
		return true
	}
	began := time.Now()
	c.logger.Error("embedded PostgreSQL exited", "pid", dead.cmd.Process.Pid, "status", exitStatus(dead.waitErr),
		"data_dir", c.dataDir, "log", c.LogFile())
	backoff := firstBackoff
	signalled := false // the leftovers of dead were sent SIGQUIT
	for attempt := 1; ; attempt++ {
		c.logger.Warn("restarting embedded PostgreSQL", "attempt", attempt, "backoff", backoff)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		c.mu.Lock()
		if c.srv != dead {
			c.mu.Unlock()
			return true
		}
		err := c.run(ctx, c.Port())
		pid := 0
		if err == nil {
			pid = c.srv.cmd.Process.Pid
		}
		c.mu.Unlock()
		if err == nil {
			c.logger.Info("embedded PostgreSQL is back", "pid", pid, "attempts", attempt,
				"took", time.Since(began).Round(time.Millisecond))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		c.logger.Warn("embedded PostgreSQL did not start", "attempt", attempt, "err", err)
		if errors.Is(err, errDataDirInUse) {
			// Backends busy in a query outlive their postmaster until they
			// next check on it, and postgres will not start while they
			// hold the shared memory. Ask them to quit, then make them.
			sig := syscall.SIGQUIT
			if signalled {
				sig = syscall.SIGKILL
			}
			signalled = c.endOrphans(sig) || signalled
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// endOrphans sends sig to the processes a dead postmaster of this data
// directory left behind (see orphans), and reports whether there were any.
func (c *Cluster) endOrphans(sig syscall.Signal) bool {
	pids := c.orphans()
	if len(pids) == 0 {
		return false
	}
	c.logger.Warn("ending the processes the dead embedded PostgreSQL left", "pids", pids, "signal", sig.String())
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig) // it may have exited meanwhile
	}
	return true
}

// orphans returns the PIDs of the postgres processes working in the data
// directory (every postgres process does) whose parent is not one of them:
// the children of a postmaster that died. It returns none when a server
// runs on the data directory (postmaster.pid names a live process), and
// none where /proc does not tell.
func (c *Cluster) orphans() []int {
	if b, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid")); err == nil {
		first, _, _ := strings.Cut(string(b), "\n")
		if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && pid > 0 {
			if state, _ := inspectProcess(pid); state != procGone {
				return nil
			}
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parents := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if dir, ok := processDir(pid); !ok || dir != c.dataDir {
			continue
		}
		if state, comm := inspectProcess(pid); state != procRunning || comm != "postgres" {
			continue
		}
		parents[pid] = parentPID(pid)
	}
	var pids []int
	for pid, parent := range parents {
		if _, ours := parents[parent]; !ours {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// parentPID returns the parent of pid from /proc, or 0.
func parentPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// "pid (comm) state ppid ...": comm may contain spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	var state string
	var ppid int
	if _, err := fmt.Sscan(s[i+1:], &state, &ppid); err != nil {
		return 0
	}
	return ppid
}

// exitStatus describes how a process ended: "exit status 1", "signal:
// killed".
func exitStatus(err error) string {
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return exit.ProcessState.String()
	}
	if err != nil {
		return err.Error()
	}
	return "exit status 0"
}
