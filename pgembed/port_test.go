//go:build unix

package pgembed

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestKeepPort checks that with KeepPort the port of the first start
// sticks to the data directory: recorded there, used again on later starts
// whatever Port asks, and never silently moved from when another program
// holds it.
func TestKeepPort(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testDir(t), "data")
	first, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, Options{DataDir: dataDir, Port: first, KeepPort: true, Fast: true})
	if c.Port() != first {
		t.Fatalf("first start on port %d, want %d", c.Port(), first)
	}
	b, err := os.ReadFile(filepath.Join(dataDir, PortFileName))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(first) {
		t.Fatalf("%s = %q, %v; want %d", PortFileName, b, err, first)
	}
	if err := c.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}

	// A later start asks for another port (the default): the recorded one wins.
	other, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	c = startCluster(t, Options{DataDir: dataDir, Port: other, KeepPort: true, Fast: true})
	if c.Port() != first {
		t.Errorf("second start on port %d, want the recorded %d", c.Port(), first)
	}
	if err := c.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}

	// Another program takes the port: Start says so, and does not move.
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(first))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Start(t.Context(), Options{DataDir: dataDir, KeepPort: true, Fast: true, Logger: quiet})
	l.Close()
	var taken *PortTakenError
	if !errors.As(err, &taken) || taken.Port != first {
		t.Fatalf("Start with the recorded port taken: err = %v, want a PortTakenError for port %d", err, first)
	}
	for _, want := range []string{"port " + strconv.Itoa(first), filepath.Join(dataDir, PortFileName), "taken by another program"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	// Without KeepPort, Port is used and the record stays as it was.
	c = startCluster(t, Options{DataDir: dataDir, Port: other, Fast: true})
	if c.Port() != other {
		t.Errorf("start without KeepPort on %d, want %d", c.Port(), other)
	}
	if p, err := recordedPort(dataDir); err != nil || p != first {
		t.Errorf("recorded port = %d, %v; want %d still", p, err, first)
	}
}

// TestKeepPortBadFile checks that a port file that holds no port is an
// error naming the file.
func TestKeepPortBadFile(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testDir(t), "data")
	c := startCluster(t, Options{DataDir: dataDir, Fast: true})
	if err := c.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dataDir, PortFileName)
	if err := os.WriteFile(path, []byte("fifty\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Start(t.Context(), Options{DataDir: dataDir, KeepPort: true, Fast: true, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"fifty"`) {
		t.Fatalf("err = %v, want one naming %s and its content", err, path)
	}
}
