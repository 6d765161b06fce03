package conformance

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// echoServer answers every line with itself; after the line "bye" it
// closes the connection. Each line it reads is sent on lines.
type echoServer struct {
	ln    net.Listener
	lines chan string
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, lines: make(chan string, 100)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					s.lines <- strings.TrimSpace(line)
					if _, err := io.WriteString(c, line); err != nil || strings.TrimSpace(line) == "bye" {
						return
					}
				}
			}()
		}
	}()
	return s
}

func newTestProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A generous bound, so that a broken proxy fails the test instead of
	// hanging it; no assertion depends on it.
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c, bufio.NewReader(c)
}

// roundTrip sends line and reads the answer.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) (string, error) {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	got, err := r.ReadString('\n')
	return strings.TrimSpace(got), err
}

func (s *echoServer) received(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-s.lines:
		if got != want {
			t.Fatalf("the server read %q, want %q", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the server never read %q", want)
	}
}

func TestProxyPassesThrough(t *testing.T) {
	t.Parallel()
	srv := newEchoServer(t)
	p := newTestProxy(t, srv.ln.Addr().String())
	c, r := dial(t, p.Addr())
	for _, line := range []string{"hello", "world"} {
		if got, err := roundTrip(t, c, r, line); err != nil || got != line {
			t.Fatalf("round trip of %q: got %q, %v", line, got, err)
		}
	}
}

func TestProxyRestart(t *testing.T) {
	t.Parallel()
	srv := newEchoServer(t)
	p := newTestProxy(t, srv.ln.Addr().String())
	c, r := dial(t, p.Addr())
	if got, err := roundTrip(t, c, r, "before"); err != nil || got != "before" {
		t.Fatalf("before the restart: %q, %v", got, err)
	}
	p.Restart(time.Hour)
	if _, err := r.ReadString('\n'); !errors.Is(err, io.EOF) && !isClosed(err) {
		t.Fatalf("an open connection after the restart: read %v, want it closed", err)
	}
	// While it is down, a new connection is accepted and closed at once.
	c2, r2 := dial(t, p.Addr())
	if _, err := roundTrip(t, c2, r2, "while down"); err == nil {
		t.Fatal("a connection made while down answered, want it refused")
	}
	// Once back (Reset ends the hour early), connections pass again.
	p.Reset()
	c3, r3 := dial(t, p.Addr())
	if got, err := roundTrip(t, c3, r3, "after"); err != nil || got != "after" {
		t.Fatalf("after the restart: %q, %v", got, err)
	}
}

// TestProxyDropFromServer: while dropping, what the client sends reaches
// the server, and the server's answer never reaches the client.
func TestProxyDropFromServer(t *testing.T) {
	t.Parallel()
	srv := newEchoServer(t)
	p := newTestProxy(t, srv.ln.Addr().String())
	c, r := dial(t, p.Addr())
	if got, err := roundTrip(t, c, r, "a"); err != nil || got != "a" {
		t.Fatalf("before dropping: %q, %v", got, err)
	}
	srv.received(t, "a")
	p.DropFromServer()
	// The server answers "bye" and closes: without the drop the client
	// would read "bye" before the end.
	got, err := roundTrip(t, c, r, "bye")
	srv.received(t, "bye")
	if got != "" || (!errors.Is(err, io.EOF) && !isClosed(err)) {
		t.Fatalf("while dropping the client read %q (%v), want nothing and the end", got, err)
	}

	p.Reset()
	c2, r2 := dial(t, p.Addr())
	if got, err := roundTrip(t, c2, r2, "again"); err != nil || got != "again" {
		t.Fatalf("after Reset: %q, %v", got, err)
	}
}

// TestProxyDropLastsUntilClose: a connection open while the proxy drops
// never passes the server's bytes again, even once new connections pass
// (between the two halves of Reset): an answer the server sends late must
// not reach the client that must never hear it.
func TestProxyDropLastsUntilClose(t *testing.T) {
	t.Parallel()
	srv := newEchoServer(t)
	p := newTestProxy(t, srv.ln.Addr().String())
	c, r := dial(t, p.Addr())
	if got, err := roundTrip(t, c, r, "a"); err != nil || got != "a" {
		t.Fatalf("before dropping: %q, %v", got, err)
	}
	srv.received(t, "a")
	p.DropFromServer()
	p.passNew()
	c2, r2 := dial(t, p.Addr())
	if got, err := roundTrip(t, c2, r2, "new"); err != nil || got != "new" {
		t.Fatalf("a connection made after the drop ended: %q, %v", got, err)
	}
	srv.received(t, "new")
	// The old connection: the server answers "late", then "bye" and
	// closes; the client must read neither, only the end.
	if _, err := io.WriteString(c, "late\nbye\n"); err != nil {
		t.Fatal(err)
	}
	srv.received(t, "late")
	srv.received(t, "bye")
	if got, err := r.ReadString('\n'); got != "" || (!errors.Is(err, io.EOF) && !isClosed(err)) {
		t.Fatalf("the connection open while dropping read %q (%v) after the drop ended, want nothing and the end", got, err)
	}
}

func isClosed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, net.ErrClosed)
}
