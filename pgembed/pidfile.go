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
// is not a running postgres of dataDir, so that a server killed without
// cleaning up (machine crash, SIGKILL, a container restart that reused its
// PID) does not block the next start. It returns an error when a postgres
// process still runs on dataDir (wrapping errDataDirInUse): two servers
// must never share a data directory.
//
// When the PID's process is simply gone, postgres would cope by itself; the
// cases it refuses are a PID reused by another program (another cluster's
// postgres included) and a postmaster that died but was not reaped yet (a
// zombie). Removing the file is safe then: postgres separately refuses to
// start while processes of an earlier server are still attached to the
// data directory's shared memory.
func clearStalePIDFile(dataDir string, logger *slog.Logger) error {
	path := filepath.Join(dataDir, "postmaster.pid")
	pid, lines, err := staleLock(path, dataDir, logger)
	if pid == 0 || err != nil {
		return err
	}
	port := ""
	if len(lines) > 3 {
		port = strings.TrimSpace(lines[3])
	}
	return fmt.Errorf("%w: %s is used by a running postgres (PID %d, port %s): "+
		"stop it (kill -INT %d) or use another data directory", errDataDirInUse, dataDir, pid, port, pid)
}

// clearStaleSocketLock does for the lock file of the server's Unix socket
// on port in sockDir what clearStalePIDFile does for postmaster.pid. A
// postmaster killed with SIGKILL leaves it behind, and postgres refuses to
// start while the PID it names runs, whatever that process is.
func clearStaleSocketLock(sockDir string, port int, dataDir string, logger *slog.Logger) error {
	path := filepath.Join(sockDir, fmt.Sprintf(".s.PGSQL.%d.lock", port))
	pid, _, err := staleLock(path, dataDir, logger)
	if pid == 0 || err != nil {
		return err
	}
	return fmt.Errorf("%w: socket lock file %s is held by a running postgres (PID %d)", errDataDirInUse, path, pid)
}

// staleLock removes the postgres lock file at path (its first line is a
// PID) unless that PID is a running postgres of dataDir, which it then
// returns with the file's lines. It returns 0 when there is no file, when
// it removed it, or when it cannot tell (postgres judges then).
func staleLock(path, dataDir string, logger *slog.Logger) (int, []string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", path, err)
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
			return 0, nil, nil // let postgres judge
		case state == procRunning && (comm == "postgres" || comm == "postmaster"):
			// Another cluster's postgres may have been given the PID.
			if dir, ok := processDir(pid); ok && dir != dataDir {
				stale = true
				break
			}
			return pid, lines, nil
		default:
			stale = true
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, nil, fmt.Errorf("remove stale %s: %w", path, err)
	}
	logger.Info("removed stale lock file", "path", path, "pid", pid)
	return 0, nil, nil
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

// processDir returns the working directory of pid, from /proc when
// available. Every postgres process works in its data directory.
func processDir(pid int) (string, bool) {
	dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	return dir, err == nil
}
