package pgembed

import "syscall"

// platformSupported reports whether Start can work on this system.
const platformSupported = true

// sysProcAttr runs a child in its own process group (so a Ctrl-C meant for
// the Go program reaches postgres only through Stop), as the user as, and
// makes the kernel send deathSig to it when the thread that started it
// exits (0: no such signal). The caller keeps that thread alive for the
// child's lifetime; see spawn.
//
// Pdeathsig is applied after the credential change in the forked child, so
// running as another user does not clear it.
func sysProcAttr(as *runAs, deathSig syscall.Signal) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSig}
	if as != nil {
		a.Credential = &syscall.Credential{Uid: uint32(as.uid), Gid: uint32(as.gid)}
	}
	return a
}
