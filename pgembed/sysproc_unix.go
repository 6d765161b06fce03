//go:build unix && !linux

package pgembed

import "syscall"

// platformSupported reports whether Start can work on this system.
const platformSupported = true

// sysProcAttr runs a child in its own process group and as the user as.
// Outside Linux there is no parent-death signal: a postmaster whose Go
// parent dies without calling Stop keeps running until it is stopped by
// hand (kill -INT <pid from postmaster.pid>); the next Start on the same
// data directory then fails with a message naming it.
func sysProcAttr(as *runAs, _ syscall.Signal) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if as != nil {
		a.Credential = &syscall.Credential{Uid: uint32(as.uid), Gid: uint32(as.gid)}
	}
	return a
}
