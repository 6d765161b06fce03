package pgembed

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// RootDataDir is the default data directory of root when root's own cache
// directory is one the postgres user, who runs root's clusters, cannot
// reach (/root is mode 0700): /var/lib is the conventional place for
// service state and every user can enter it.
const RootDataDir = "/var/lib/convo/pgdata"

// Options configures Start. The zero value starts a durable cluster in the
// default data directory on a free port.
type Options struct {
	// DataDir holds the cluster. It is created and initialised (initdb) when
	// it does not hold a cluster yet, and reused as is when it does. When
	// the process runs as root, DataDir is chowned to the postgres user, and
	// all its parent directories must be traversable by that user.
	//
	// "" selects DefaultDataDir().
	DataDir string

	// Port is the TCP port on 127.0.0.1. 0 picks a free one. When a fixed
	// port is already taken at Start, a free port is used instead (and
	// logged): read the effective one back with Cluster.Port or
	// Cluster.DSN.
	Port int

	// KeepPort gives the data directory one port across starts: the port
	// the server listens on is recorded in the data directory
	// (PortFileName) when it is not the recorded one, and a later Start
	// with KeepPort listens on the recorded port instead of Port. That
	// port is never moved from: when another program holds it, Start
	// fails with *PortTakenError, which names it. With no port recorded
	// yet, Port (or a free one when it is taken) is used and recorded.
	KeepPort bool

	// MaxConnections is the cluster's max_connections. 0:
	// DefaultMaxConnections.
	MaxConnections int

	// Logical sets wal_level=logical with room for 20 replication slots and
	// 20 WAL senders.
	Logical bool

	// Fast trades durability for speed: fsync, synchronous_commit and
	// full_page_writes are off and initdb skips syncing. Committed data
	// survives the postgres processes dying (including Restart) but not
	// the machine crashing. Meant for tests.
	Fast bool

	// Supervise starts the server again whenever it exits without Stop
	// or Restart asking (a crash, the OOM killer, a kill -9), on the same
	// port, after a growing backoff while starts fail (100 ms doubling up
	// to 5 s), until Stop. PostgreSQL recovers from the crash on start.
	// Each event is logged to Logger: "embedded PostgreSQL exited",
	// "restarting embedded PostgreSQL", "embedded PostgreSQL is back".
	Supervise bool

	// BinDir is the directory holding the postgres and initdb executables.
	// "" searches PATH, then /usr/lib/postgresql/<newest>/bin,
	// /usr/pgsql-<newest>/bin and /usr/local/pgsql/bin.
	BinDir string

	// Logger receives pgembed's own messages (started, stopped, fell back
	// to another port). nil means slog.Default(). The server's own output
	// never goes there: it is written to LogFile in the data directory.
	Logger *slog.Logger
}

// DefaultDataDir returns the data directory used when Options.DataDir is
// empty: <user cache dir>/convo/pgdata, that is $XDG_CACHE_HOME/convo/pgdata
// or ~/.cache/convo/pgdata on Linux, per user (per HOME). Root gets the
// same, as long as the postgres user who runs root's clusters can enter
// every existing parent directory of it; when it cannot (HOME=/root, mode
// 0700), RootDataDir.
func DefaultDataDir() (string, error) {
	cache, err := os.UserCacheDir()
	if os.Geteuid() != 0 {
		if err != nil {
			return "", fmt.Errorf("default data directory: %w (set Options.DataDir)", err)
		}
		return filepath.Join(cache, "convo", "pgdata"), nil
	}
	if err != nil {
		return RootDataDir, nil
	}
	dir := filepath.Join(cache, "convo", "pgdata")
	as, err := serverUser()
	if err != nil || as.reach(dir) != nil {
		return RootDataDir, nil
	}
	return dir, nil
}

// DefaultMaxConnections is the max_connections of a cluster whose Options
// do not set it.
const DefaultMaxConnections = 200
