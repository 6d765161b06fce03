package pgembed

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// maxSocketDirLen keeps dir + "/.s.PGSQL.65535" within the 107 bytes a Unix
// socket address can hold.
const maxSocketDirLen = 107 - len("/.s.PGSQL.65535")

// prepareSocketDir picks the directory of the server's Unix socket: the data
// directory, which the server user owns already, unless its path is too long
// for a socket address; then a fresh temporary directory, removed at Stop.
func (c *Cluster) prepareSocketDir() error {
	if len(c.dataDir) <= maxSocketDirLen {
		c.sockDir = c.dataDir
		return nil
	}
	dir, err := os.MkdirTemp("", "convo-pg-")
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if err := c.as.chown(dir); err != nil {
		os.Remove(dir)
		return err
	}
	c.sockDir, c.ownSock = dir, true
	return nil
}

func (c *Cluster) removeSocketDir() {
	if c.ownSock {
		os.RemoveAll(c.sockDir)
	}
}

// portFree reports whether a TCP port on 127.0.0.1 can be bound right now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// freePort asks the kernel for a TCP port on 127.0.0.1 that is free now.
// Another process may take it before the server binds it; Start retries.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
