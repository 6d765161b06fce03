package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// runningFileName is the file in the embedded default's data directory
// that says which convo serves on it: its pid on the first line, its URL
// on the second once it listens. The convo that wrote it holds an
// exclusive lock (flock) on it for as long as it runs and removes it as
// it stops, so that a second convo started on the same data directory
// learns where the first one serves before it touches PostgreSQL; one
// left by a server that was killed is stale, which the kernel tells by
// having dropped the lock with the process.
const runningFileName = "convo-running"

// runningLock is this process's hold on a data directory's running file.
type runningLock struct {
	f    *os.File
	path string
}

// errAlreadyRunning marks a start refused because another convo serves on
// the data directory.
var errAlreadyRunning = errors.New("convo is already running")

// lockRunning takes dataDir's running file and writes this process's pid
// into it. When another convo holds it, the error wraps errAlreadyRunning
// and says where that one serves, and its pid.
func lockRunning(dataDir string) (*runningLock, error) {
	path := filepath.Join(dataDir, runningFileName)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("data directory %s: %w", dataDir, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			pid, url := readRunning(f)
			f.Close()
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("lock %s: %w", path, err)
			}
			return nil, alreadyRunning(dataDir, pid, url)
		}
		// The holder before us may have removed the file between our
		// open and our lock: then we hold a file nobody else sees.
		held, err1 := f.Stat()
		named, err2 := os.Stat(path)
		if err1 != nil || err2 != nil || !os.SameFile(held, named) {
			f.Close()
			continue
		}
		l := &runningLock{f: f, path: path}
		if err := l.write(""); err != nil {
			l.release()
			return nil, err
		}
		return l, nil
	}
}

// alreadyRunning words the refusal to start on a data directory another
// convo serves on.
func alreadyRunning(dataDir string, pid int, url string) error {
	switch {
	case url != "":
		return fmt.Errorf("%w at %s (pid %d) on the data directory %s: open that address, or stop it first "+
			"(Ctrl-C in its terminal, or kill -INT %d); a second convo needs a data directory of its own (CONVO_DATA_DIR)",
			errAlreadyRunning, url, pid, dataDir, pid)
	case pid != 0:
		return fmt.Errorf("%w (pid %d) on the data directory %s: it is still starting; wait for it, or stop it (kill -INT %d)",
			errAlreadyRunning, pid, dataDir, pid)
	}
	return fmt.Errorf("%w on the data directory %s", errAlreadyRunning, dataDir)
}

// readRunning reads the pid and URL of a running file.
func readRunning(r io.Reader) (pid int, url string) {
	sc := bufio.NewScanner(r)
	if sc.Scan() {
		pid, _ = strconv.Atoi(strings.TrimSpace(sc.Text()))
	}
	if sc.Scan() {
		url = strings.TrimSpace(sc.Text())
	}
	return pid, url
}

// write replaces the file's content with this process's pid and url.
func (l *runningLock) write(url string) error {
	content := strconv.Itoa(os.Getpid()) + "\n"
	if url != "" {
		content += url + "\n"
	}
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write %s: %w", l.path, err)
	}
	if _, err := l.f.WriteAt([]byte(content), 0); err != nil {
		return fmt.Errorf("write %s: %w", l.path, err)
	}
	return nil
}

// release removes the file, then drops the lock.
func (l *runningLock) release() {
	os.Remove(l.path)
	l.f.Close()
}
