//go:build unix

package pgtest

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// tempDirPattern names the directories of private clusters, created in
// memoryDir() when there is one, else in os.TempDir().
const tempDirPattern = "convo-pgtest-*"

func tempDirBases() []string {
	if mem := memoryDir(); mem != "" {
		return []string{mem, os.TempDir()}
	}
	return []string{os.TempDir()}
}

// lockedTempDir creates the directory of this process's cluster, readable
// by the postgres user (pgembed runs the server as that user when we are
// root), and holds an exclusive lock on dir/lock until unlock is called or
// the process dies. The lock file appears only once locked, so that
// removeStaleDirs never sees it unlocked while its owner lives.
func lockedTempDir() (dir string, unlock func(), err error) {
	dir, err = os.MkdirTemp(tempDirBases()[0], tempDirPattern)
	if err != nil {
		return "", nil, fmt.Errorf("temporary directory: %w", err)
	}
	fail := func(err error) (string, func(), error) {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("temporary directory: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	f, err := os.Create(filepath.Join(dir, "lock.new"))
	if err != nil {
		return fail(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fail(err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, "lock")); err != nil {
		f.Close()
		return fail(err)
	}
	return dir, func() { f.Close() }, nil
}

// removeStaleDirs deletes the cluster directories of test binaries that
// ended without releasing them (killed, or without pgtest.Main): their lock
// is free. A directory without a lock file is being created, unless it is
// old.
func removeStaleDirs() {
	var dirs []string
	// /dev/shm too, in case it no longer qualifies as memoryDir.
	for _, base := range []string{"/dev/shm", os.TempDir()} {
		matches, _ := filepath.Glob(filepath.Join(base, tempDirPattern))
		dirs = append(dirs, matches...)
	}
	for _, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, "lock"))
		if err != nil {
			if fi, err := os.Stat(dir); err == nil && time.Since(fi.ModTime()) > time.Hour {
				os.RemoveAll(dir)
			}
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			os.RemoveAll(dir)
		}
		f.Close()
	}
}
