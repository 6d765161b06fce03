package main

import (
	"golang.org/x/sys/unix"
)

const stallWatchSupported = true

// sendQueue reads a socket's send queue: the bytes not yet acknowledged
// by the client (SIOCOUTQ: sent and unacknowledged, or not sent yet), and,
// when some are, how many bytes the client has acknowledged in all
// (TCP_INFO), which grows while it reads. ok is false when the socket
// cannot be read (it is closed).
func sendQueue(raw interface{ Control(func(fd uintptr)) error }) (queued int, acked uint64, ok bool) {
	err := raw.Control(func(fd uintptr) {
		n, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
		if err != nil || n == 0 {
			return
		}
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return
		}
		queued, acked, ok = n, info.Bytes_acked, true
	})
	if err != nil {
		return 0, 0, false
	}
	return queued, acked, ok
}
