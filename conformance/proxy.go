package conformance

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy in front of PostgreSQL: the runner's DATABASE_URL
// points at it, so that the driver can break the runner's connections the
// ways a network and a database do. It passes bytes through until told
// otherwise.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[*proxied]struct{}
	// refuseUntil: connections accepted before then are closed at once,
	// as by a database that is restarting.
	refuseUntil time.Time
	// dropping: bytes from the server are read and thrown away instead
	// of reaching the client.
	dropping bool
	closed   bool
}

// proxied is one client connection and its connection to the server.
type proxied struct {
	client, server net.Conn
	// dropping (guarded by the proxy's mu): this connection throws away
	// what the server sends until it is closed, whatever the proxy's
	// flag says.
	dropping bool
}

func (c *proxied) close() {
	c.client.Close()
	c.server.Close()
}

// NewProxy listens on a free port of 127.0.0.1 and forwards every
// connection to target (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*proxied]struct{}{}}
	p.wg.Go(p.serve)
	return p, nil
}

// Addr is the address clients connect to (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Restart closes every connection and refuses new ones for down, as a
// database restart does: clients see their connections break and their
// reconnects fail until it is back.
func (p *Proxy) Restart(down time.Duration) {
	p.mu.Lock()
	p.refuseUntil = time.Now().Add(down)
	p.mu.Unlock()
	p.closeAll()
}

// DropFromServer makes every connection, open or new, throw away what the
// server sends from now on: a statement still runs and commits, and its
// client never hears so. Reset ends it.
func (p *Proxy) DropFromServer() {
	p.mu.Lock()
	p.dropping = true
	p.mu.Unlock()
}

// Reset closes every connection and passes new ones through again, bytes
// from the server included.
func (p *Proxy) Reset() {
	p.passNew()
	p.closeAll()
}

// passNew is Reset but the closing: connections accepted from now on
// pass everything through, and those open now drop what the server sends
// until they are closed. Without that, bytes a server sent late (the end
// of an answer that follows a commit the driver already saw) could slip
// through between the end of the drop and the close: the client would
// take an answer it must never see.
func (p *Proxy) passNew() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropping = false
	p.refuseUntil = time.Time{}
	for c := range p.conns {
		c.dropping = true
	}
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.closeAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	conns := make([]*proxied, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// drops reports whether what the server sends on c is thrown away.
func (p *Proxy) drops(c *proxied) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropping || c.dropping
}

func (p *Proxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		refused := p.closed || time.Now().Before(p.refuseUntil)
		p.mu.Unlock()
		if refused {
			client.Close()
			continue
		}
		server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			client.Close()
			continue
		}
		c := &proxied{client: client, server: server}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(c) })
	}
}

// forward copies the client's bytes to the server and the server's to the
// client (unless dropping) until either side ends, then closes both.
func (p *Proxy) forward(c *proxied) {
	defer func() {
		c.close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	up := make(chan struct{})
	go func() {
		defer close(up)
		_, _ = io.Copy(c.server, c.client)
		c.close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 && !p.drops(c) {
			if _, werr := c.client.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	c.close()
	<-up
}
