// Package pgembed runs a private PostgreSQL server from the binaries
// installed on the machine: the "embedded default" of cmd/api when no
// DATABASE_URL is given, and the test server of internal/pgtest.
//
// The server listens on 127.0.0.1 only and keeps its data in a directory
// that survives restarts of the program. TCP connections need the password
// of the superuser postgres, generated when the directory is made and kept
// in it (PasswordFileName, mode 0600); DSN carries it. The Unix socket, in
// a directory only the server user can enter, is trusted. It runs as a child process of the Go program
// and, on Linux, never outlives it: if the program dies without calling
// Stop, the kernel signals the server to shut down. With Options.Supervise
// the program starts it again when it dies on its own.
//
// As root, PostgreSQL's processes run as the postgres user, which must own
// the data directory (Start chowns a directory it creates).
package pgembed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Cluster is a running private PostgreSQL server. Its methods are safe for
// concurrent use.
type Cluster struct {
	bin     binaries
	as      *runAs
	logger  *slog.Logger
	dataDir string
	sockDir string
	ownSock bool // sockDir is a temporary directory to remove at Stop
	logical bool
	fast    bool
	// maxConnections is the server's max_connections.
	maxConnections int
	deathSig       syscall.Signal
	// password is the superuser's; unprotected is set for a data
	// directory made without one, which Start then protects.
	password    string
	unprotected bool

	port atomic.Int32 // stays the same across Restart

	mu  sync.Mutex // serialises Restart, Stop and the supervisor's starts
	srv *server    // nil once stopped

	// supervised is Options.Supervise. stopSupervisor ends the
	// supervisor, which closes supervisorDone as it returns.
	supervised     bool
	stopSupervisor context.CancelFunc
	supervisorDone chan struct{}
}

// startTimeout bounds the wait for the server to accept connections when
// the caller's context has no deadline. Crash recovery of a large data
// directory can take a while.
const startTimeout = 2 * time.Minute

// Start runs a PostgreSQL server as described by opts and returns once it
// accepts connections. It initialises the data directory when needed,
// removes a postmaster.pid left by a crashed earlier run, and moves to a
// free port when opts.Port is taken (with opts.KeepPort, a port recorded
// in the data directory is used instead, and never moved from: a taken one
// fails with *PortTakenError).
//
// The error wraps ErrNotInstalled when the binaries are missing; when the
// server exits during startup, it includes the end of the server log.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if !platformSupported {
		return nil, errors.New("start postgres: pgembed needs a Unix system; set DATABASE_URL to use an existing server")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	bin, err := findBinaries(opts.BinDir)
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	as, err := serverUser()
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	dataDir := opts.DataDir
	if dataDir == "" {
		if dataDir, err = DefaultDataDir(); err != nil {
			return nil, fmt.Errorf("start postgres: %w", err)
		}
	}
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return nil, fmt.Errorf("start postgres: data directory: %w", err)
	}
	c := &Cluster{
		bin:            bin,
		as:             as,
		logger:         logger,
		dataDir:        dataDir,
		logical:        opts.Logical,
		maxConnections: cmp.Or(opts.MaxConnections, DefaultMaxConnections),
		fast:           opts.Fast,
		supervised:     opts.Supervise,
		// A disposable cluster may die abruptly; a durable one shuts down
		// cleanly (fast shutdown checkpoints) so the next start needs no
		// crash recovery.
		deathSig: syscall.SIGINT,
	}
	if opts.Fast {
		c.deathSig = syscall.SIGQUIT
	}
	if err := c.prepareDataDir(ctx); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if err := c.prepareSocketDir(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	logPath := c.LogFile()
	if err := os.Rename(logPath, logPath+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		logger.Warn("rotate postgres log", "err", err)
	}

	port := opts.Port
	recorded := 0
	if opts.KeepPort {
		if recorded, err = recordedPort(c.dataDir); err != nil {
			c.removeSocketDir()
			return nil, fmt.Errorf("start postgres: %w", err)
		}
	}
	switch {
	case recorded != 0:
		port = recorded
		// A postgres of this data directory still on the port (the
		// orphan of a crashed run, going away) is waited for below;
		// anything else is another program's.
		if !portFree(port) && clearStalePIDFile(c.dataDir, logger) == nil {
			c.removeSocketDir()
			return nil, fmt.Errorf("start postgres: %w", &PortTakenError{Port: port, File: filepath.Join(c.dataDir, PortFileName), DataDir: c.dataDir})
		}
	case port != 0 && !portFree(port):
		logger.Warn("postgres port taken, using a free one", "port", port)
		port = 0
	}
	if err := c.runRetrying(ctx, port, recorded == 0); err != nil {
		c.removeSocketDir()
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if c.unprotected {
		if err := c.protect(ctx); err != nil {
			c.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // the protect error says more
			return nil, fmt.Errorf("start postgres: %w", err)
		}
		c.unprotected = false
	}
	logger.Info(fmt.Sprintf("embedded PostgreSQL started on port %d", c.Port()), "password_file", filepath.Join(c.dataDir, PasswordFileName), "pid", c.srv.cmd.Process.Pid,
		"data_dir", c.dataDir, "log", logPath, "supervised", c.supervised)
	if opts.KeepPort && c.Port() != recorded {
		if err := c.recordPort(c.Port()); err != nil {
			logger.Warn("the port will not be kept for the next start", "err", err)
		} else {
			logger.Info(fmt.Sprintf("the embedded PostgreSQL keeps port %d from now on", c.Port()),
				"port_file", filepath.Join(c.dataDir, PortFileName))
		}
	}
	if c.supervised {
		superviseCtx, cancel := context.WithCancel(context.Background())
		c.stopSupervisor, c.supervisorDone = cancel, make(chan struct{})
		go c.supervise(superviseCtx, c.supervisorDone)
	}
	return c, nil
}

// DSN returns a URL connecting to database as the superuser postgres over
// TCP with its password, for example
// postgres://postgres:…@127.0.0.1:5433/convo?sslmode=disable.
// It stays valid across Restart.
func (c *Cluster) DSN(database string) string { return dsn(c.Port(), database, c.password) }

// Port returns the TCP port the server listens on (127.0.0.1 only).
func (c *Cluster) Port() int { return int(c.port.Load()) }

// DataDir returns the absolute path of the data directory.
func (c *Cluster) DataDir() string { return c.dataDir }

// Tool returns the path of one of PostgreSQL's programs (pg_dump,
// pg_restore, psql …) in the directory of the server binaries the cluster
// runs (a symbolic link to postgres followed), so that its version is the
// server's; else the one in PATH.
func (c *Cluster) Tool(name string) string {
	if postgres, err := filepath.EvalSymlinks(c.bin.postgres); err == nil {
		if p := filepath.Join(filepath.Dir(postgres), name); isFile(p) {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return name
}

// SocketDir returns the directory of the server's Unix socket (psql -h
// SocketDir). It is the data directory unless that path is too long for a
// socket address.
func (c *Cluster) SocketDir() string { return c.sockDir }

// LogFile returns the path of the server log: everything postgres writes to
// its standard output and error.
func (c *Cluster) LogFile() string { return filepath.Join(c.dataDir, LogFileName) }

// CreateDatabase creates database name unless it exists already.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "42P04" { // duplicate_database
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// Restart simulates a database outage: it stops the server abruptly (an
// immediate shutdown, as in a crash: every connection drops at once) and
// starts it again on the same port, returning once it accepts connections.
//
// Committed transactions survive, even in Fast mode: Restart runs a
// checkpoint just before the shutdown. As after a real crash, the server
// then runs recovery, and logical replication consumers may be sent again
// changes they had received but not confirmed.
//
// It returns an error when the cluster was stopped or the server does not
// come back (for example because another process took the port).
func (c *Cluster) Restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.srv == nil {
		return errors.New("restart postgres: cluster is stopped")
	}
	if !c.srv.exited() {
		c.flushWAL(ctx)
		if err := c.srv.stop(ctx, syscall.SIGQUIT); err != nil {
			return fmt.Errorf("restart postgres: %w", err)
		}
	}
	c.srv = nil
	if err := c.runRetrying(ctx, int(c.port.Load()), false); err != nil {
		return fmt.Errorf("restart postgres: %w", err)
	}
	c.logger.Info("postgres restarted", "pid", c.srv.cmd.Process.Pid, "port", c.port.Load())
	return nil
}

// Stop ends the supervision (Options.Supervise), shuts the server down with
// a fast shutdown (connections are closed, data is checkpointed) and waits
// until its process is gone. If ctx ends first, Stop escalates to an
// immediate shutdown and then SIGKILL, and returns ctx's error once the
// process is gone. Stopping a stopped cluster does nothing.
func (c *Cluster) Stop(ctx context.Context) error {
	if c.stopSupervisor != nil {
		// Before taking c.mu, which a start by the supervisor holds: the
		// cancel cuts that start short.
		c.stopSupervisor()
		<-c.supervisorDone
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.srv == nil {
		return nil
	}
	err := c.srv.stop(ctx, syscall.SIGINT)
	c.srv = nil
	c.removeSocketDir()
	if err != nil {
		return fmt.Errorf("stop postgres: %w", err)
	}
	c.logger.Info("postgres stopped", "data_dir", c.dataDir)
	return nil
}

// retryWindow is how long Start and Restart keep trying while the data
// directory is still used by a server that is going away (such as the
// orphan of a crashed program, shutting down on its parent-death signal) or
// while the port Restart needs is taken.
const retryWindow = 10 * time.Second

// runRetrying runs the server on port (0: a free one). When the port turns
// out to be taken it moves to another free port if movePort is set, and
// otherwise waits for it within retryWindow; it waits the same way for a
// previous server on the data directory to go away.
func (c *Cluster) runRetrying(ctx context.Context, port int, movePort bool) error {
	deadline := time.Now().Add(retryWindow)
	for moves := 0; ; {
		if port == 0 {
			var err error
			if port, err = freePort(); err != nil {
				return err
			}
		}
		err := c.run(ctx, port)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errPortInUse) && movePort && moves < 5:
			// Another process took the port between our check and the
			// server's bind.
			c.logger.Debug("postgres port taken during start, moving", "port", port)
			moves++
			port = 0
			continue
		case (errors.Is(err, errPortInUse) || errors.Is(err, errDataDirInUse)) && time.Now().Before(deadline):
			c.logger.Debug("postgres cannot start yet, retrying", "err", err)
		default:
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// run starts the postmaster on port and waits until it accepts
// connections. The caller holds c.mu or owns c exclusively.
func (c *Cluster) run(ctx context.Context, port int) error {
	if err := clearStalePIDFile(c.dataDir, c.logger); err != nil {
		return err
	}
	if err := clearStaleSocketLock(c.sockDir, port, c.dataDir, c.logger); err != nil {
		return err
	}
	logPath := c.LogFile()
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	logStart, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		logFile.Close()
		return fmt.Errorf("open server log: %w", err)
	}

	args := []string{
		"-D", c.dataDir,
		"-p", strconv.Itoa(port),
		"-k", c.sockDir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=" + strconv.Itoa(c.maxConnections),
	}
	if c.logical {
		args = append(args,
			"-c", "wal_level=logical",
			"-c", "max_replication_slots=20",
			"-c", "max_wal_senders=20")
	}
	if c.fast {
		args = append(args,
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off")
	}
	cmd := exec.Command(c.bin.postgres, args...)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr(c.as, c.deathSig)
	srv, err := spawn(cmd, logFile)
	if err != nil {
		return fmt.Errorf("run %s: %w", c.bin.postgres, err)
	}
	if err := c.waitReady(ctx, srv, port); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopGrace)
		if stopErr := srv.stop(stopCtx, syscall.SIGQUIT); stopErr != nil {
			c.logger.Warn("stop postgres after failed start", "err", stopErr)
		}
		cancel()
		tail := logTail(logPath, logStart)
		switch {
		case portInUse(tail):
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		case dataDirInUse(tail):
			err = fmt.Errorf("%w: %w", errDataDirInUse, err)
		}
		return fmt.Errorf("%w%s\nserver log %s:\n%s", err, c.as.hint(), logPath, tail)
	}
	srv.ready.Store(true)
	if !c.supervised {
		go c.watch(srv)
	}
	c.port.Store(int32(port))
	c.srv = srv
	return nil
}

// watch logs an exit nobody asked for: the server crashed or was killed.
// (A supervised cluster's supervisor logs it, and starts the server again.)
func (c *Cluster) watch(srv *server) {
	<-srv.done
	if !srv.stopping.Load() {
		c.logger.Error("postgres exited unexpectedly", "err", srv.waitErr, "log", c.LogFile())
	}
}

// waitReady polls until the server on port, started as srv, answers a
// query. It checks the answer comes from this data directory: another
// server may already listen on the port while ours fails to bind it.
func (c *Cluster) waitReady(ctx context.Context, srv *server, port int) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	cfg, err := pgx.ParseConfig(dsn(port, "postgres", c.password))
	if err != nil {
		return err
	}
	cfg.ConnectTimeout = 2 * time.Second
	for {
		if conn, err := pgx.ConnectConfig(ctx, cfg); err == nil {
			var dir string
			err = conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir)
			conn.Close(ctx)
			if err == nil && dir == c.dataDir {
				return nil
			}
		}
		select {
		case <-srv.done:
			return fmt.Errorf("postgres exited during startup (%v)", srv.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("postgres not accepting connections: %w", ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// flushWAL runs a checkpoint so that an immediate shutdown loses no
// committed transaction even with synchronous_commit=off, whose commits
// may otherwise still sit in WAL buffers. (A synchronous commit of a
// do-nothing transaction would not do: a commit that wrote no WAL of its
// own skips the flush.) Best effort.
func (c *Cluster) flushWAL(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		c.logger.Warn("checkpoint before restart", "err", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		c.logger.Warn("checkpoint before restart", "err", err)
	}
}

func dsn(port int, database, password string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", password), Host: fmt.Sprintf("127.0.0.1:%d", port),
		Path: "/" + database, RawQuery: "sslmode=disable"}
	if password == "" {
		u.User = url.User("postgres")
	}
	return u.String()
}
