package main

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A client that stops reading is cut off by the write deadline only when
// a write blocks, and a write blocks only once the kernel's socket
// buffers are full: what the server sent until then (up to tcp_wmem's
// maximum, 4 MB by default, per socket) leaves the process and waits in
// the kernel, the write returns, and the stream lives on, holding that
// memory, for as long as the client keeps its connection. The stall
// watcher closes such a connection: one goroutine per listener looks at
// every accepted connection every tick and cuts one whose send queue has
// held bytes the client did not acknowledge, without any being
// acknowledged, for the write timeout (stall_linux.go reads the queue;
// elsewhere the watcher does nothing and the write deadline alone
// applies).

// stallListener registers every connection it accepts with its watcher.
type stallListener struct {
	net.Listener
	w *stallWatcher
}

// watchStalls wraps l so that a connection whose unsent bytes do not
// drain for timeout is closed (see stallWatcher). Where the kernel's
// queue cannot be read it returns l.
func watchStalls(l net.Listener, timeout time.Duration) net.Listener {
	if !stallWatchSupported {
		return l
	}
	w := &stallWatcher{timeout: timeout, conns: make(map[*watchedConn]*stallState), now: time.Now}
	w.tick = min(max(timeout/8, 50*time.Millisecond), time.Second)
	sl := &stallListener{Listener: l, w: w}
	go w.run()
	return sl
}

// Close closes the listener; the watcher goes on until the connections
// it accepted are closed.
func (l *stallListener) Close() error {
	l.w.closed.Store(true)
	return l.Listener.Close()
}

// Accept registers the connection with the watcher.
func (l *stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c, nil
	}
	wc := &watchedConn{TCPConn: tc, raw: raw, w: l.w}
	l.w.add(wc)
	return wc, nil
}

// watchedConn is an accepted connection the watcher looks at until it is
// closed.
type watchedConn struct {
	*net.TCPConn
	raw interface {
		Control(func(fd uintptr)) error
	}
	w    *stallWatcher
	once sync.Once
}

// Close closes the connection and stops watching it.
func (c *watchedConn) Close() error {
	c.once.Do(func() { c.w.remove(c) })
	return c.TCPConn.Close()
}

// stallState is what the watcher knows of one connection: since when its
// send queue has held bytes without any being acknowledged, and the
// acknowledged count then.
type stallState struct {
	stuckSince time.Time
	acked      uint64
}

// stallWatcher cuts connections whose unsent bytes have not drained for
// timeout. One per listener; each tick costs two system calls per
// connection that has bytes queued, one per idle connection.
type stallWatcher struct {
	timeout, tick time.Duration
	now           func() time.Time
	closed        atomic.Bool

	mu    sync.Mutex
	conns map[*watchedConn]*stallState
	// cut counts the connections the watcher closed.
	cut int
}

func (w *stallWatcher) add(c *watchedConn) {
	w.mu.Lock()
	w.conns[c] = &stallState{}
	w.mu.Unlock()
}

func (w *stallWatcher) remove(c *watchedConn) {
	w.mu.Lock()
	delete(w.conns, c)
	w.mu.Unlock()
}

// run looks at every connection each tick until the listener is closed
// and the last connection it accepted is gone (hijacked connections, the
// parked streams, outlive the listener while the server drains).
func (w *stallWatcher) run() {
	t := time.NewTicker(w.tick)
	defer t.Stop()
	for range t.C {
		if w.sweep() == 0 && w.closed.Load() {
			return
		}
	}
}

// sweep looks at every connection once, closes the stalled ones, and
// returns how many are watched. The system calls run outside w.mu, so
// that accepting and closing connections never waits on a sweep; only
// sweep reads or writes a stallState, so its fields need no lock.
func (w *stallWatcher) sweep() int {
	now := w.now()
	type watched struct {
		c  *watchedConn
		st *stallState
	}
	w.mu.Lock()
	all := make([]watched, 0, len(w.conns))
	for c, st := range w.conns {
		all = append(all, watched{c, st})
	}
	w.mu.Unlock()
	var stalled []*watchedConn
	for _, x := range all {
		queued, acked, ok := sendQueue(x.c.raw)
		switch st := x.st; {
		case !ok || queued == 0:
			st.stuckSince = time.Time{}
		case st.stuckSince.IsZero() || acked != st.acked:
			st.stuckSince, st.acked = now, acked
		case now.Sub(st.stuckSince) >= w.timeout:
			stalled = append(stalled, x.c)
		}
	}
	w.mu.Lock()
	w.cut += len(stalled)
	w.mu.Unlock()
	for _, c := range stalled {
		c.Close()
	}
	return len(all) - len(stalled)
}

// cutCount is how many connections the watcher has closed.
func (w *stallWatcher) cutCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cut
}
