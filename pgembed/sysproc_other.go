//go:build !unix

package pgembed

import "syscall"

// platformSupported reports whether Start can work on this system: pgembed
// needs Unix signals to stop the server, so on other systems Start fails
// and callers should use an existing server (DATABASE_URL).
const platformSupported = false

func sysProcAttr(*runAs, syscall.Signal) *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
