package pgembed

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PortFileName is the file in the data directory that keeps the port the
// server took on its first start (Options.KeepPort), so that a URL saved
// then stays valid.
const PortFileName = "convo-port"

// PortTakenError is returned by Start with Options.KeepPort when the port
// recorded in the data directory is taken by another program. Start does
// not move to another port then: every URL saved since the first start
// would stop working without a word.
type PortTakenError struct {
	Port    int    // the recorded port
	File    string // where it is recorded (PortFileName in the data directory)
	DataDir string
}

func (e *PortTakenError) Error() string {
	return fmt.Sprintf("port %d, which the data directory %s has used since its first start (recorded in %s), "+
		"is taken by another program: stop that program (ss -ltnp 'sport = :%d' shows it), "+
		"or start once on another port, or remove %s so that the next start picks a new port and keeps that one",
		e.Port, e.DataDir, e.File, e.Port, e.File)
}

// recordedPort returns the port kept in dataDir's PortFileName, or 0 when
// there is none. A file that does not hold a port is an error that names
// it.
func recordedPort(dataDir string) (int, error) {
	path := filepath.Join(dataDir, PortFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the port in %s: %w", path, err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || port < 1 || port > 65535 {
		return 0, fmt.Errorf("%s holds %q, not a port: write one (1 to 65535), or remove the file to pick a new port", path, strings.TrimSpace(string(b)))
	}
	return port, nil
}

// recordPort keeps port in the data directory's PortFileName.
func (c *Cluster) recordPort(port int) error {
	path := filepath.Join(c.dataDir, PortFileName)
	if err := os.WriteFile(path, []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
		return fmt.Errorf("record the port in %s: %w", path, err)
	}
	return c.as.chown(path)
}
