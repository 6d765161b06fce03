package pgembed

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// errDataDirInUse marks a start refused because a server, or processes of
// an earlier one, still run on the data directory.
var errDataDirInUse = errors.New("data directory in use")

// clearStalePIDFile removes dataDir/postmaster.pid when the process it names
// is not a running postgres, so that a server killed without cleaning up
// (machine crash, SIGKILL, a container restart that reused its PID) does not
// block the next start. It returns an error when a postgres process still
// runs on dataDir (wrapping errDataDirInUse): two servers must never share a
// data directory.
//
// When the PID's process is simply gone, postgres would cope by itself; the
// cases it refuses are a PID reused by another program and a postmaster
// that died but was not reaped yet (a zombie). Removing the file is safe
// then: postgres separately refuses to start while processes of an earlier
// server are still attached to the data directory's shared memory.
func clearStalePIDFile(dataDir string, logger *slog.Logger) error {
	path := filepath.Join(dataDir, "postmaster.pid")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	lines := strings.Split(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if pid < 0 {
		pid = -pid // a single-user backend writes its PID negated
	}
	stale := err != nil || pid == 0
	if !stale {
		switch state, comm := inspectProcess(pid); {
		case state == procUnknown:
			return nil // let postgres judge
		case state == procRunning && (comm == "postgres" || comm == "postmaster"):
			port := ""
			if len(lines) > 3 {
				port = strings.TrimSpace(lines[3])
			}
			return fmt.Errorf("%w: %s is used by a running postgres (PID %d, port %s): "+
				"stop it (kill -INT %d) or use another data directory", errDataDirInUse, dataDir, pid, port, pid)
		default:
			stale = true
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", path, err)
	}
	logger.Info("removed stale postmaster.pid", "data_dir", dataDir, "pid", pid)
	return nil
}

type procState int

const (
	procUnknown procState = iota
	procGone              // no such process, or a zombie
	procRunning
)

// inspectProcess tells whether pid runs and, from /proc when available,
// its command name.
func inspectProcess(pid int) (procState, string) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// "pid (comm) S ...": comm may itself contain spaces and parentheses.
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open || closing+2 >= len(s) {
			return procUnknown, ""
		}
		comm, state := s[open+1:closing], s[closing+2]
		if state == 'Z' || state == 'X' {
			return procGone, comm
		}
		return procRunning, comm
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return procGone, ""
	}
	switch err := p.Signal(syscall.Signal(0)); {
	case err == nil:
		return procUnknown, "" // alive, but we cannot tell what it is
	case errors.Is(err, os.ErrProcessDone), errors.Is(err, syscall.ESRCH):
		return procGone, ""
	default:
		return procUnknown, ""
	}
}
