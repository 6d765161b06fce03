// Command worker runs convo workers without the API server, against the
// PostgreSQL in DATABASE_URL, so that workers scale independently of it.
// It only calls the SQL worker API, like a worker in any other language.
// It also runs the maintenance loops (package maintenance: the lease
// reaper and the compactor), as the API server does, so that a deployment
// of workers alone still fails the prompts of dead workers. With an admin
// address it serves its metrics (the workers', the queue's and the
// loops') and the Go profiler there.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/files/s3blobs"
	"github.com/convo-dev/convo/maintenance"
	"github.com/convo-dev/convo/metrics"
	"github.com/convo-dev/convo/pglisten"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/telemetry"
	"github.com/convo-dev/convo/worker"
	"github.com/convo-dev/convo/worker/builtin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	m := NewMain()
	if err := m.ParseFlags(os.Args[1:], os.Getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := m.Run(ctx); err != nil {
		m.Close()
		m.Logger.Error("convo worker failed to start", "err", err)
		os.Exit(1)
	}
	<-ctx.Done()
	m.Logger.Info("shutting down")
	if err := m.Close(); err != nil {
		m.Logger.Error("shutdown", "err", err)
		os.Exit(1)
	}
}

// Config is the command's configuration: each field has an environment
// variable and a flag of the same meaning.
type Config struct {
	DatabaseURL string // DATABASE_URL, --database-url (required)
	// DBPoolMode says what is between DatabaseURL and PostgreSQL
	// (CONVO_DB_POOL_MODE, --db-pool-mode), as in cmd/api: "session" or
	// "transaction" (a transaction pooler: no named prepared statements,
	// and the listener connects with DirectDatabaseURL).
	DBPoolMode string
	// DirectDatabaseURL reaches PostgreSQL without a transaction pooler,
	// for the LISTEN connection (CONVO_DIRECT_DATABASE_URL,
	// --direct-database-url). Empty: DatabaseURL; required with
	// DBPoolMode "transaction".
	DirectDatabaseURL string
	LogLevel          string // CONVO_LOG_LEVEL, --log-level
	// CompactAfter is how long after a prompt finishes its delta events
	// are merged (CONVO_COMPACT_AFTER, --compact-after, as in cmd/api);
	// 0 turns compaction off.
	CompactAfter time.Duration
	// AdminAddr, when set, serves /metrics and /debug/pprof/ there
	// (CONVO_ADMIN_ADDR, --admin-addr), as cmd/api does.
	AdminAddr string
	// FileStorage is where files' bytes live, as the API servers have it
	// (CONVO_FILE_STORAGE, --file-storage: postgres or s3): with s3 the
	// workers read files in the bucket the CONVO_S3_* settings name
	// (S3), which must exist.
	FileStorage string
	S3          s3blobs.Config
	Worker      worker.Settings
}

// Main is the whole command: ParseFlags, then Run, then Close. Tests drive
// exactly this wiring.
type Main struct {
	Config Config
	// Logger defaults to text on stderr at Config.LogLevel.
	Logger *slog.Logger

	db      *pgxpool.Pool
	workers *worker.Pool
	// listener is the LISTEN connection on DirectDatabaseURL, when one
	// is given; stopListener stops it once the workers are stopped.
	listener     *pglisten.Listener
	stopListener context.CancelFunc
	listenerDone chan struct{}
	admin        *metrics.Admin
	// reapEvery is how often the lease reaper runs; 0: its default.
	reapEvery       time.Duration
	stopMaintenance context.CancelFunc
	maintenanceDone chan struct{}
	// getenv is what ParseFlags read the environment through; Run reads
	// the OTEL_* variables through it too.
	getenv func(string) string
	// telemetry exports the workers' traces and metrics as the OTEL_*
	// variables say (package telemetry); Close flushes it last.
	telemetry *telemetry.Telemetry
}

// NewMain returns a Main with the default settings.
func NewMain() *Main {
	return &Main{Config: Config{LogLevel: "info", DBPoolMode: "session", CompactAfter: time.Hour, FileStorage: files.StoragePostgres, Worker: worker.DefaultSettings()}}
}

// ParseFlags reads configuration from the environment (through getenv) and
// then from args, flags winning.
func (m *Main) ParseFlags(args []string, getenv func(string) string) error {
	c := &m.Config
	m.getenv = getenv
	if v := getenv("DATABASE_URL"); v != "" {
		c.DatabaseURL = v
	}
	if v := getenv("CONVO_DB_POOL_MODE"); v != "" {
		c.DBPoolMode = v
	}
	if v := getenv("CONVO_DIRECT_DATABASE_URL"); v != "" {
		c.DirectDatabaseURL = v
	}
	if v := getenv("CONVO_LOG_LEVEL"); v != "" {
		c.LogLevel = v
	}
	if v := getenv("CONVO_ADMIN_ADDR"); v != "" {
		c.AdminAddr = v
	}
	if v := getenv("CONVO_COMPACT_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("CONVO_COMPACT_AFTER: %q is not a duration such as 1h, 30m or 5s", v)
		}
		c.CompactAfter = d
	}
	if v := getenv("CONVO_FILE_STORAGE"); v != "" {
		c.FileStorage = v
	}
	if err := c.S3.FromEnv(getenv); err != nil {
		return err
	}
	if err := c.Worker.FromEnv(getenv); err != nil {
		return err
	}

	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: worker [flags]\n\nRuns convo workers against DATABASE_URL. Every flag has an environment variable; flags win.\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "PostgreSQL to work on (DATABASE_URL), migrated by the API server")
	fs.StringVar(&c.DBPoolMode, "db-pool-mode", c.DBPoolMode,
		"what is between --database-url and PostgreSQL (CONVO_DB_POOL_MODE): session (nothing, or a session pooler) or transaction (PgBouncer's pool_mode = transaction; needs --direct-database-url)")
	fs.StringVar(&c.DirectDatabaseURL, "direct-database-url", c.DirectDatabaseURL,
		"PostgreSQL without a transaction pooler, for the LISTEN connection (CONVO_DIRECT_DATABASE_URL); empty: --database-url")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error (CONVO_LOG_LEVEL)")
	fs.StringVar(&c.AdminAddr, "admin-addr", c.AdminAddr, "serve /metrics and /debug/pprof/ on this (private) address (CONVO_ADMIN_ADDR); empty: none")
	fs.DurationVar(&c.CompactAfter, "compact-after", c.CompactAfter, "merge a finished prompt's delta events this long after it ends (CONVO_COMPACT_AFTER); 0: never")
	fs.StringVar(&c.FileStorage, "file-storage", c.FileStorage, "where files' bytes live, as the API servers have it: postgres or s3 (CONVO_FILE_STORAGE); s3 needs the --s3-* settings")
	c.S3.RegisterFlags(fs)
	c.Worker.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := c.checkFileStorage(); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if c.CompactAfter < 0 {
		return fmt.Errorf("--compact-after %v: want a duration of 0 or more", c.CompactAfter)
	}
	if c.DatabaseURL == "" {
		return errors.New("DATABASE_URL (or --database-url) is required: the database the API server uses (`make run` prints it)")
	}
	switch c.DBPoolMode {
	case "session":
	case "transaction":
		if c.DirectDatabaseURL == "" {
			return errors.New("CONVO_DB_POOL_MODE=transaction needs CONVO_DIRECT_DATABASE_URL: a URL that reaches PostgreSQL directly " +
				"(or through a session pooler), for the workers' LISTEN connection, which a transaction pooler cannot carry")
		}
	default:
		return fmt.Errorf("CONVO_DB_POOL_MODE (--db-pool-mode) is %q: want \"session\" (DATABASE_URL reaches PostgreSQL directly or through a session pooler) "+
			"or \"transaction\" (DATABASE_URL goes through a transaction pooler such as PgBouncer with pool_mode = transaction)", c.DBPoolMode)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("log level %q: want debug, info, warn or error", c.LogLevel)
	}
	if m.Logger == nil {
		m.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	return nil
}

// checkFileStorage refuses a storage the workers cannot read, naming the
// setting: s3 needs its endpoint, bucket and keys.
func (c *Config) checkFileStorage() error {
	switch c.FileStorage {
	case files.StoragePostgres:
		return nil
	case files.StorageS3:
	default:
		return fmt.Errorf("CONVO_FILE_STORAGE (--file-storage) %q: want postgres or s3", c.FileStorage)
	}
	for _, s := range []struct{ env, flag, value string }{
		{"CONVO_S3_ENDPOINT", "s3-endpoint", c.S3.Endpoint}, {"CONVO_S3_BUCKET", "s3-bucket", c.S3.Bucket},
		{"CONVO_S3_ACCESS_KEY", "s3-access-key", c.S3.AccessKey},
	} {
		if s.value == "" {
			return fmt.Errorf("%s (--%s): required with CONVO_FILE_STORAGE=s3", s.env, s.flag)
		}
	}
	if c.S3.SecretKey == "" {
		return errors.New("CONVO_S3_SECRET_KEY: required with CONVO_FILE_STORAGE=s3")
	}
	return nil
}

// Run connects to the database and starts the workers and the maintenance
// loops. It returns once the workers listen for prompts; Close stops
// everything.
func (m *Main) Run(ctx context.Context) error {
	if m.Logger == nil {
		m.Logger = slog.Default()
	}
	cfg, err := builtin.Config(m.Config.Worker, m.Logger)
	if err != nil {
		return err
	}
	getenv := m.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if m.telemetry, err = telemetry.FromEnv(ctx, getenv, "convo-worker"); err != nil {
		return err
	}
	cfg.Telemetry = m.telemetry
	poolConfig, err := pgxpool.ParseConfig(m.Config.DatabaseURL)
	if err != nil {
		return fmt.Errorf("database url: %w", err)
	}
	// However many prompts run at once (see worker.Start).
	poolConfig.MaxConns = int32(m.Config.Worker.DBConns)
	// A conversation's context reads whatever its JSON's nesting.
	postgres.KeepRawJSON(poolConfig)
	uses := []postgres.ConnectionUse{
		{What: "worker pool", Conns: m.Config.Worker.DBConns, Setting: "CONVO_WORKER_DB_CONNS"},
		{What: "listener", Conns: 1},
	}
	if m.Config.DBPoolMode == "transaction" {
		// No named prepared statements; the pooler's own pool size bounds
		// what reaches PostgreSQL, so only the listener counts.
		postgres.ForTransactionPooler(poolConfig)
		uses = uses[1:]
	}
	if m.db, err = pgxpool.NewWithConfig(ctx, poolConfig); err != nil {
		return fmt.Errorf("connect to the database: %w", err)
	}
	store := postgres.New(m.db)
	if err := store.CheckConnections(ctx, uses); err != nil {
		return err
	}
	if m.Config.DirectDatabaseURL != "" {
		// LISTEN needs a session of its own: not through a transaction
		// pooler.
		direct, err := pgxpool.ParseConfig(m.Config.DirectDatabaseURL)
		if err != nil {
			return fmt.Errorf("direct database url (CONVO_DIRECT_DATABASE_URL): %w", err)
		}
		m.listener = pglisten.New(pglisten.Options{ConnConfig: direct.ConnConfig, Logger: m.Logger, PingInterval: 30 * time.Second})
		listenCtx, stopListener := context.WithCancel(context.WithoutCancel(ctx))
		m.stopListener, m.listenerDone = stopListener, make(chan struct{})
		go func() {
			defer close(m.listenerDone)
			m.listener.Run(listenCtx)
		}()
		cfg.Listener = m.listener
	}
	if m.Config.FileStorage == files.StorageS3 {
		blobs, err := s3blobs.New(ctx, m.Config.S3)
		if err != nil {
			return fmt.Errorf("CONVO_FILE_STORAGE=s3: %w", err)
		}
		cfg.Blobs = blobs
	}
	if m.workers, err = worker.Start(ctx, m.db, cfg); err != nil {
		return err
	}
	// A login of the worker role (docs/deploy.md, "The worker role") may
	// reap leases (expire_leases) but neither compact nor read the queue's
	// tables: those are left to the API servers, rather than failing at
	// every turn.
	var mayCompact, mayReadQueue bool
	if err := m.db.QueryRow(ctx, `SELECT
			coalesce((SELECT bool_and(has_function_privilege(p.oid, 'EXECUTE')) FROM pg_proc p
			           WHERE p.pronamespace = 'convo'::regnamespace AND p.proname = 'compact_events'), false),
			has_table_privilege('convo.prompts', 'SELECT')`).Scan(&mayCompact, &mayReadQueue); err != nil {
		return fmt.Errorf("read this login's privileges: %w", err)
	}
	compactAfter := m.Config.CompactAfter
	if !mayCompact && compactAfter > 0 {
		m.Logger.Info("no compaction: this login (the worker role) may not call convo.compact_events; the API servers compact")
		compactAfter = 0
	}
	loops := maintenance.New(maintenance.Options{
		Store: store, ReapEvery: m.reapEvery, CompactAfter: compactAfter, Logger: m.Logger,
	})
	loopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	m.stopMaintenance, m.maintenanceDone = stop, make(chan struct{})
	go func() {
		defer close(m.maintenanceDone)
		loops.Run(loopCtx)
	}()
	if m.Config.AdminAddr != "" {
		reg := metrics.NewRegistry()
		reg.MustRegister(m.workers, loops)
		if mayReadQueue {
			reg.MustRegister(maintenance.QueueCollector{Store: store})
		}
		if m.admin, err = metrics.ServeAdmin(m.Config.AdminAddr, reg, m.Logger); err != nil {
			return err
		}
	}
	return nil
}

// Close stops the maintenance loops and the workers (failing the prompts
// they were running), closes the pool, and then stops the admin server
// (metrics stay scrapeable until the workers are done). It is safe to
// call after a failed Run.
func (m *Main) Close() error {
	var errs []error
	if m.stopMaintenance != nil {
		m.stopMaintenance()
		<-m.maintenanceDone
		m.stopMaintenance = nil
	}
	if m.workers != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.workers.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
		m.workers = nil
	}
	if m.stopListener != nil {
		m.stopListener()
		<-m.listenerDone
		m.stopListener = nil
	}
	if m.db != nil {
		m.db.Close()
		m.db = nil
	}
	if m.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := m.admin.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		m.admin = nil
	}
	if m.telemetry != nil {
		// Last: the spans of the replies stopped above are flushed.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := m.telemetry.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
		m.telemetry = nil
	}
	return errors.Join(errs...)
}
