//go:build !linux

package main

// stallWatchSupported is false: only Linux's send queue is read; elsewhere
// the write deadline alone cuts a client that does not read.
const stallWatchSupported = false

func sendQueue(raw interface{ Control(func(fd uintptr)) error }) (queued int, acked uint64, ok bool) {
	return 0, 0, false
}
