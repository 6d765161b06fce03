// Command api serves convo: the Connect API, the web app and /healthz, on
// the PostgreSQL in DATABASE_URL or, when that is unset, on a private
// PostgreSQL it starts from the local binaries (the embedded default).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/cors"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/connectapi"
	"github.com/convo-dev/convo/db"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/files/s3blobs"
	"github.com/convo-dev/convo/guard"
	"github.com/convo-dev/convo/limit"
	"github.com/convo-dev/convo/maintenance"
	"github.com/convo-dev/convo/metrics"
	"github.com/convo-dev/convo/pgembed"
	"github.com/convo-dev/convo/pglisten"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/presence"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/telemetry"
	"github.com/convo-dev/convo/wire"
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
	// Every line goes through the configured logger: slog's package
	// functions would otherwise write through the standard log package,
	// in its own format.
	slog.SetDefault(m.Logger)
	if m.Config.MigrateOnly {
		if err := m.Migrate(ctx); err != nil {
			m.Logger.Error("migration failed", "err", err)
			os.Exit(1)
		}
		return
	}
	if err := m.Run(ctx); err != nil {
		m.Close()
		logFailure(m.Logger, os.Stderr, "convo failed to start", err)
		os.Exit(1)
	}
	<-ctx.Done()
	m.Logger.Info("shutting down")
	if err := m.Close(); err != nil {
		m.Logger.Error("shutdown", "err", err)
		os.Exit(1)
	}
}

// Config is the server's configuration: each field has an environment
// variable and a flag of the same meaning (README.md, "Configuration").
type Config struct {
	DatabaseURL string // DATABASE_URL, --database-url
	HTTPAddr    string // CONVO_HTTP_ADDR, --http-addr
	DataDir     string // CONVO_DATA_DIR, --data-dir: the embedded PostgreSQL's data
	// EmbedPort is the embedded PostgreSQL's port when embedPortGiven
	// (CONVO_EMBED_PORT, --embed-port; 0: a free one); otherwise the
	// port its data directory took on its first start, EmbedPort then
	// (or a free one when that was taken).
	EmbedPort      int
	embedPortGiven bool
	LogLevel       string // CONVO_LOG_LEVEL, --log-level
	AuthSecret     string // CONVO_AUTH_SECRET, --auth-secret: HS256 secret of bearer tokens
	AuthJWKSURL    string // CONVO_AUTH_JWKS_URL, --auth-jwks-url: the keys (RSA, ECDSA, Ed25519) of an identity provider
	// AuthIssuer and AuthAudience, when set, must match the tokens' iss
	// and aud claims (CONVO_AUTH_ISSUER, CONVO_AUTH_AUDIENCE).
	AuthIssuer   string
	AuthAudience string
	Feed         string // CONVO_FEED, --feed: what feeds the stream hub, notify or logical (feed.go)
	// CORSOrigins are the origins whose pages may call every route
	// (CONVO_CORS_ORIGINS, --cors-origins; cors.go); empty: same origin
	// only.
	CORSOrigins []string
	// CompactAfter is how long after a prompt finishes its delta events
	// are merged (CONVO_COMPACT_AFTER, --compact-after); 0 turns
	// compaction off.
	CompactAfter time.Duration
	// MigrateOnly applies the migrations to DatabaseURL and exits
	// (--migrate), so they can run ahead of a deploy.
	MigrateOnly bool
	// MigrateAtStart: Run applies the migrations and functions the
	// database lacks (CONVO_MIGRATE_AT_START, --migrate-at-start; on by
	// default). Off, they run ahead with --migrate, and a server whose
	// database is older than its release refuses to start.
	MigrateAtStart bool
	// AdminAddr, when set, serves /metrics and /debug/pprof/ there
	// (CONVO_ADMIN_ADDR, --admin-addr).
	AdminAddr string
	// PublicMetrics serves /metrics on HTTPAddr too
	// (CONVO_PUBLIC_METRICS, --public-metrics); off by default, since the
	// public address may face the internet.
	PublicMetrics bool
	// ParkStreams parks idle StreamConversation streams of the Connect
	// protocol over HTTP/1.1: they hold no goroutine and no buffers while
	// idle (CONVO_PARK_STREAMS, --park-streams; on by default).
	ParkStreams bool
	// AllowedHosts are the host names the server answers to besides
	// loopback names (CONVO_ALLOWED_HOSTS, --allowed-hosts; see
	// guard.go). In single-user mode every other Host is refused; with
	// authentication, only when the list is set.
	AllowedHosts []string
	// DrainGrace is how long open streams go on after SIGTERM before they
	// are told to reconnect elsewhere (CONVO_DRAIN_GRACE, --drain-grace).
	DrainGrace time.Duration
	// DrainTimeout bounds how long in-process workers may take to finish
	// the replies in flight at SIGTERM (CONVO_DRAIN_TIMEOUT,
	// --drain-timeout); those still running then are failed.
	DrainTimeout time.Duration
	// BodyTimeout bounds how long a request's body may take to arrive
	// (CONVO_BODY_TIMEOUT, --body-timeout): a client that sends it more
	// slowly is cut off, and nothing is written. 0: no bound.
	BodyTimeout time.Duration
	// WriteTimeout bounds every write to a client, a stream's snapshot
	// included, and a whole response that is not a stream
	// (CONVO_WRITE_TIMEOUT, --write-timeout): a client that does not read
	// for this long is cut off and what its request held is released.
	WriteTimeout time.Duration
	// SnapshotBytes bounds a stream's snapshot, a ListMessages page and
	// the messages of a branchSwitched (CONVO_SNAPSHOT_BYTES,
	// --snapshot-bytes): the latest messages that add up to this; older
	// ones are paged in with ListMessages.
	SnapshotBytes int
	// DBMaxConns bounds the API's pool of connections: RPCs, snapshots,
	// the hub's reads and maintenance (CONVO_DB_MAX_CONNS,
	// --db-max-conns). The workers have their own pool
	// (CONVO_WORKER_DB_CONNS); see connectionUses.
	DBMaxConns int
	// SnapshotConns sizes the pool that reads streams' snapshots, in
	// groups (CONVO_SNAPSHOT_CONNS, --snapshot-conns; postgres.
	// SnapshotReader): at most this many group reads at once, never on
	// the connections of sends or of the hub's live reads.
	SnapshotConns int
	// DBPoolMode says what is between DATABASE_URL and PostgreSQL
	// (CONVO_DB_POOL_MODE, --db-pool-mode; pooler.go): "session" (nothing,
	// or a session pooler) or "transaction" (a transaction pooler: the
	// pools then use no named prepared statements and no session state).
	DBPoolMode string
	// DirectDatabaseURL reaches PostgreSQL without a transaction pooler
	// (CONVO_DIRECT_DATABASE_URL, --direct-database-url): the listener,
	// the logical feed and the migrations connect with it. Empty:
	// DatabaseURL; required with DBPoolMode "transaction".
	DirectDatabaseURL string
	// WorkerDatabaseURL is what the in-process workers connect to
	// (CONVO_WORKER_DATABASE_URL): a login of the worker role
	// (docs/deploy.md, "The worker role"), so that they can do no more than
	// an outside worker. Empty: DatabaseURL, or with the embedded default
	// its worker login.
	WorkerDatabaseURL string
	// Workers configures the in-process workers (CONVO_WORKERS and the
	// model settings; see package worker).
	Workers worker.Settings
	// Limits bounds what one user (and the server) may hold (limits.go).
	Limits Limits
	// FileURLs configures files' signed URLs (fileurls.go).
	FileURLs FileURLs
	// Files bounds uploads and says when unsent files go (files.go).
	Files FileSettings
	// FileStorage says where files' bytes live (filestorage.go).
	FileStorage FileStorage
}

// Main is the whole server: ParseFlags, then Run, then Close. End-to-end
// tests drive exactly this wiring.
type Main struct {
	Config Config
	// Logger defaults to JSON-free text on stderr at Config.LogLevel.
	Logger *slog.Logger
	// Stdout receives the human-readable start banner.
	Stdout io.Writer

	cluster *pgembed.Cluster
	// running holds the embedded data directory's running file
	// (running.go) from before PostgreSQL starts until Close.
	running *runningLock
	pool    *pgxpool.Pool
	store   *postgres.Store
	// files uploads, reads and collects files, in PostgreSQL (fileStore
	// their metadata); fileURLs signs the URLs of their content.
	files     *files.Service
	fileStore *postgres.FileStore
	fileURLs  *files.Signer
	hub       *wire.Hub
	// presence keeps who views and types in each conversation, told to
	// the other servers by NOTIFY on pgListener's connection.
	presence *presence.Tracker
	workers  *worker.Pool
	// demoModel: the in-process workers run and default to the demo
	// model (GetServerInfo).
	demoModel bool
	// models are the model names this server's workers run (none without
	// workers): the models OpenAI's Responses API accepts.
	models []string
	// workerPool is the in-process workers' pool (CONVO_WORKER_DB_CONNS),
	// hubPool the stream hub's (hubConns); snapshotPool the snapshots'
	// (Config.SnapshotConns).
	workerPool   *pgxpool.Pool
	hubPool      *pgxpool.Pool
	snapshotPool *pgxpool.Pool
	// snapshots reads streams' snapshots and whole-conversation reads
	// in groups, on snapshotPool.
	snapshots *postgres.SnapshotReader
	listener  net.Listener
	metrics   *serverMetrics
	// auth authenticates requests; stopAuth ends its JWKS refreshes.
	auth     auth.Authenticator
	stopAuth context.CancelFunc
	// cors is the policy of Config.CORSOrigins; nil without one.
	cors *cors.Cors
	// draining is set once Close begins: /healthz answers 503.
	draining atomic.Bool

	// background runs the hub, its feed and the lease reaper; Close
	// cancels it first, so open streams end before the server shuts down.
	stopBackground context.CancelFunc
	// parking runs the parked streams (Config.ParkStreams); nil when off.
	parking *connectapi.Parking
	// pgListener is the process's one LISTEN connection, shared by the
	// notify feed and the workers; stopListener stops it, after the
	// workers (they hear cancellations through it while they drain).
	pgListener   *pglisten.Listener
	stopListener context.CancelFunc
	background   sync.WaitGroup
	server       *http.Server
	serveErr     chan error
	admin        *metrics.Admin
	// s3Blobs keeps files' bytes with CONVO_FILE_STORAGE=s3; nil: they
	// live in PostgreSQL.
	s3Blobs *s3blobs.Store
	// getenv is what ParseFlags read the environment through: Run reads
	// the OTEL_* variables through it too.
	getenv func(string) string
	// telemetry exports traces and metrics over OTLP as the OTEL_*
	// variables say (package telemetry); Close flushes it last.
	telemetry *telemetry.Telemetry
}

// NewMain returns a Main with the defaults of README.md, "Configuration".
func NewMain() *Main {
	return &Main{
		Config: Config{HTTPAddr: "127.0.0.1:8080", EmbedPort: 5434, DBPoolMode: poolModeSession, LogLevel: "info", Feed: feedNotify,
			CompactAfter: time.Hour, DrainGrace: 2 * time.Second, DrainTimeout: 20 * time.Second, ParkStreams: true, MigrateAtStart: true,
			DBMaxConns: 16, SnapshotConns: postgres.DefaultSnapshotConns, WriteTimeout: 30 * time.Second, SnapshotBytes: stream.DefaultSnapshotBytes, BodyTimeout: 10 * time.Second,
			Workers: worker.DefaultSettings(), Limits: DefaultLimits(), Files: DefaultFileSettings(),
			FileURLs:    FileURLs{TTL: files.DefaultURLTTL},
			FileStorage: FileStorage{Kind: fileStoragePostgres},
		},
		Stdout: os.Stdout,
	}
}

// ParseFlags reads configuration from the environment (through getenv)
// and then from args, flags winning.
func (m *Main) ParseFlags(args []string, getenv func(string) string) error {
	c := &m.Config
	m.getenv = getenv
	fromEnv := func(dst *string, name string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	fromEnv(&c.DatabaseURL, "DATABASE_URL")
	fromEnv(&c.WorkerDatabaseURL, "CONVO_WORKER_DATABASE_URL")
	fromEnv(&c.DirectDatabaseURL, "CONVO_DIRECT_DATABASE_URL")
	fromEnv(&c.DBPoolMode, "CONVO_DB_POOL_MODE")
	fromEnv(&c.HTTPAddr, "CONVO_HTTP_ADDR")
	fromEnv(&c.DataDir, "CONVO_DATA_DIR")
	fromEnv(&c.LogLevel, "CONVO_LOG_LEVEL")
	fromEnv(&c.AuthSecret, "CONVO_AUTH_SECRET")
	fromEnv(&c.AuthJWKSURL, "CONVO_AUTH_JWKS_URL")
	fromEnv(&c.AuthIssuer, "CONVO_AUTH_ISSUER")
	fromEnv(&c.AuthAudience, "CONVO_AUTH_AUDIENCE")
	fromEnv(&c.Feed, "CONVO_FEED")
	if err := c.Workers.FromEnv(getenv); err != nil {
		return err
	}
	if err := c.Limits.fromEnv(getenv); err != nil {
		return err
	}
	if err := c.Files.fromEnv(getenv); err != nil {
		return err
	}
	if err := c.FileURLs.fromEnv(getenv); err != nil {
		return err
	}
	if err := c.FileStorage.fromEnv(getenv); err != nil {
		return err
	}
	fromEnv(&c.AdminAddr, "CONVO_ADMIN_ADDR")
	for name, dst := range map[string]*bool{"CONVO_PUBLIC_METRICS": &c.PublicMetrics, "CONVO_PARK_STREAMS": &c.ParkStreams, "CONVO_MIGRATE_AT_START": &c.MigrateAtStart} {
		if v := getenv(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not true or false", name, v)
			}
			*dst = b
		}
	}
	corsOrigins := getenv("CONVO_CORS_ORIGINS")
	allowedHosts := getenv("CONVO_ALLOWED_HOSTS")
	for name, dst := range map[string]*time.Duration{
		"CONVO_COMPACT_AFTER": &c.CompactAfter, "CONVO_DRAIN_GRACE": &c.DrainGrace, "CONVO_DRAIN_TIMEOUT": &c.DrainTimeout,
		"CONVO_WRITE_TIMEOUT": &c.WriteTimeout, "CONVO_BODY_TIMEOUT": &c.BodyTimeout,
	} {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("%s: %q is not a duration such as 1h, 30m or 5s", name, v)
			}
			*dst = d
		}
	}
	for name, dst := range map[string]*int{
		"CONVO_DB_MAX_CONNS": &c.DBMaxConns, "CONVO_SNAPSHOT_BYTES": &c.SnapshotBytes, "CONVO_SNAPSHOT_CONNS": &c.SnapshotConns,
	} {
		if v := getenv(name); v != "" {
			if _, err := fmt.Sscan(v, dst); err != nil {
				return fmt.Errorf("%s: %q is not a whole number", name, v)
			}
		}
	}
	if v := getenv("CONVO_EMBED_PORT"); v != "" {
		if _, err := fmt.Sscan(v, &c.EmbedPort); err != nil {
			return fmt.Errorf("CONVO_EMBED_PORT: %q is not a port number", v)
		}
	}

	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: api [flags]\n\nServes convo. Every flag has an environment variable; flags win.\n\n")
		fs.PrintDefaults()
	}
	c.registerFlags(fs, &corsOrigins, &allowedHosts)
	if err := fs.Parse(args); err != nil {
		return err
	}
	names := newSettingNames(fs, getenv)
	c.embedPortGiven = names.given["embed-port"] || getenv("CONVO_EMBED_PORT") != ""
	if err := c.Limits.check(names.name); err != nil {
		return err
	}
	if err := c.Files.check(names.name); err != nil {
		return err
	}
	if err := c.FileURLs.check(names); err != nil {
		return err
	}
	if err := c.FileStorage.check(names); err != nil {
		return err
	}
	if err := c.Workers.Check(names.name); err != nil {
		return err
	}
	var err error
	if c.CORSOrigins, err = parseCORSOrigins(corsOrigins); err != nil {
		return err
	}
	if c.AllowedHosts, err = guard.ParseHosts(allowedHosts); err != nil {
		return fmt.Errorf("CONVO_ALLOWED_HOSTS: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	for name, d := range map[string]time.Duration{
		"compact-after": c.CompactAfter, "drain-grace": c.DrainGrace, "drain-timeout": c.DrainTimeout, "body-timeout": c.BodyTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("%s: want a duration of 0 or more", names.name(name))
		}
	}
	if c.DBMaxConns < 2 {
		return fmt.Errorf("%s: want 2 or more", names.name("db-max-conns"))
	}
	if c.SnapshotConns < 1 {
		return fmt.Errorf("%s: want 1 or more", names.name("snapshot-conns"))
	}
	if c.WriteTimeout < time.Second {
		return fmt.Errorf("%s: want 1s or more", names.name("write-timeout"))
	}
	if c.SnapshotBytes < 4096 {
		return fmt.Errorf("%s: want 4096 or more", names.name("snapshot-bytes"))
	}
	if c.MigrateOnly && c.DatabaseURL == "" {
		return errors.New("--migrate needs DATABASE_URL (or --database-url): the database to migrate")
	}
	if err := checkFeed(c.Feed); err != nil {
		return err
	}
	if err := c.checkPooler(); err != nil {
		return err
	}
	if c.AuthSecret != "" && c.AuthJWKSURL != "" {
		return errors.New("set CONVO_AUTH_SECRET or CONVO_AUTH_JWKS_URL, not both")
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

// registerFlags defines every setting's flag on fs, the current values as
// defaults; each usage names the setting's environment variable in
// parentheses, which errors about its value use (settingNames).
func (c *Config) registerFlags(fs *flag.FlagSet, corsOrigins, allowedHosts *string) {
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "PostgreSQL to use (DATABASE_URL); empty: start a private PostgreSQL from the local binaries")
	fs.StringVar(&c.HTTPAddr, "http-addr", c.HTTPAddr, "listen address (CONVO_HTTP_ADDR)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "data directory of the embedded PostgreSQL (CONVO_DATA_DIR); empty: a per-user default")
	fs.IntVar(&c.EmbedPort, "embed-port", c.EmbedPort, "port of the embedded PostgreSQL for this start, 0 for a free one (CONVO_EMBED_PORT); unset: the port its data directory took on its first start (this one, or a free one when it was taken)")
	fs.StringVar(&c.DBPoolMode, "db-pool-mode", c.DBPoolMode,
		"what is between --database-url and PostgreSQL (CONVO_DB_POOL_MODE): session (nothing, or a session pooler) or transaction (PgBouncer's pool_mode = transaction; needs --direct-database-url)")
	fs.StringVar(&c.DirectDatabaseURL, "direct-database-url", c.DirectDatabaseURL,
		"PostgreSQL without a transaction pooler, for the listener, the logical feed and the migrations (CONVO_DIRECT_DATABASE_URL); empty: --database-url")
	fs.StringVar(&c.WorkerDatabaseURL, "worker-database-url", c.WorkerDatabaseURL,
		"what the in-process workers connect to, a login of the worker role convo_worker (CONVO_WORKER_DATABASE_URL); empty: --database-url, or the embedded default's worker login")
	fs.IntVar(&c.DBMaxConns, "db-max-conns", c.DBMaxConns, "connections the API's pool may open (CONVO_DB_MAX_CONNS); the workers' are --worker-db-conns")
	fs.IntVar(&c.SnapshotConns, "snapshot-conns", c.SnapshotConns, "connections that read streams' snapshots, those asked for at once read together (CONVO_SNAPSHOT_CONNS)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error (CONVO_LOG_LEVEL)")
	fs.StringVar(&c.AuthSecret, "auth-secret", c.AuthSecret, "require bearer JWTs signed HS256 with this secret (CONVO_AUTH_SECRET); empty: single-user mode")
	fs.StringVar(&c.AuthJWKSURL, "auth-jwks-url", c.AuthJWKSURL, "require bearer JWTs signed (RS256, ES256, EdDSA, …) by a key from this JWKS URL (CONVO_AUTH_JWKS_URL)")
	fs.StringVar(&c.AuthIssuer, "auth-issuer", c.AuthIssuer, "require the tokens' iss claim to be this (CONVO_AUTH_ISSUER); empty: not checked")
	fs.StringVar(&c.AuthAudience, "auth-audience", c.AuthAudience, "require the tokens' aud claim to hold this (CONVO_AUTH_AUDIENCE); empty: not checked")
	fs.StringVar(&c.Feed, "feed", c.Feed, "what feeds streams (CONVO_FEED): notify (LISTEN/NOTIFY) or logical (logical replication; needs wal_level=logical)")
	fs.DurationVar(&c.CompactAfter, "compact-after", c.CompactAfter, "merge a finished prompt's delta events this long after it ends (CONVO_COMPACT_AFTER); 0: never")
	fs.BoolVar(&c.MigrateOnly, "migrate", false, "apply the database migrations to DATABASE_URL and exit")
	fs.BoolVar(&c.MigrateAtStart, "migrate-at-start", c.MigrateAtStart, "apply the migrations the database lacks at start (CONVO_MIGRATE_AT_START); false: they run ahead with --migrate, and a database older than this release is refused")
	fs.StringVar(&c.AdminAddr, "admin-addr", c.AdminAddr, "serve /metrics and /debug/pprof/ on this (private) address (CONVO_ADMIN_ADDR); empty: no admin address")
	fs.BoolVar(&c.PublicMetrics, "public-metrics", c.PublicMetrics, "serve /metrics on --http-addr too (CONVO_PUBLIC_METRICS); off by default")
	fs.BoolVar(&c.ParkStreams, "park-streams", c.ParkStreams, "idle HTTP/1.1 Connect streams hold no goroutine or buffers (CONVO_PARK_STREAMS)")
	fs.DurationVar(&c.DrainGrace, "drain-grace", c.DrainGrace, "on SIGTERM, how long open streams go on before they are told to reconnect elsewhere (CONVO_DRAIN_GRACE)")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", c.WriteTimeout, "cut off a client that does not read a write (a stream's snapshot included), or a whole response that is not a stream, for this long (CONVO_WRITE_TIMEOUT)")
	fs.IntVar(&c.SnapshotBytes, "snapshot-bytes", c.SnapshotBytes, "a stream's snapshot holds the latest messages that add up to this many bytes; older ones are paged with ListMessages (CONVO_SNAPSHOT_BYTES)")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", c.DrainTimeout, "on SIGTERM, how long in-process workers may take to finish the replies in flight (CONVO_DRAIN_TIMEOUT)")
	fs.DurationVar(&c.BodyTimeout, "body-timeout", c.BodyTimeout, "how long a request's body may take to arrive; a slower client is cut off (CONVO_BODY_TIMEOUT); 0: no bound")
	fs.StringVar(corsOrigins, "cors-origins", *corsOrigins, "comma-separated origins whose pages may call convo, e.g. http://localhost:5173, or * for any (CONVO_CORS_ORIGINS); empty: same origin only")
	fs.StringVar(allowedHosts, "allowed-hosts", *allowedHosts, "comma-separated host names the server answers to besides localhost, 127.0.0.1 and [::1], e.g. convo.example.com or *.example.com (CONVO_ALLOWED_HOSTS); without authentication every other Host is refused")
	c.Workers.RegisterFlags(fs)
	c.Limits.registerFlags(fs)
	c.Files.registerFlags(fs)
	c.FileURLs.registerFlags(fs)
	c.FileStorage.registerFlags(fs)
}

// Migrate applies the migrations and functions (--migrate) through the
// direct URL (Config.DirectDatabaseURL, else DatabaseURL): goose's session
// lock is held, which a transaction pooler does not keep. A database a
// newer release migrated is left as it is, with a warning.
func (m *Main) Migrate(ctx context.Context) error {
	dsn := m.Config.directDatabaseURL(m.Config.DatabaseURL)
	res, err := db.Upgrade(ctx, dsn, db.Options{Migrate: true})
	if err != nil {
		return fmt.Errorf("migrate %s: %w", redact(dsn), err)
	}
	if res.Newer() {
		m.Logger.Warn("the database was migrated by a newer release: this one changed nothing",
			"database", redact(dsn), "database_migration", res.Database, "release_migration", res.Release)
		return nil
	}
	m.Logger.Info("the database is migrated", "database", redact(dsn), "migration", res.Release, "applied", len(res.Applied))
	return nil
}

// upgrade migrates the database at dsn at start (Config.MigrateAtStart),
// or checks that it is not older than this release; a database a newer
// release migrated is served as it is (docs/deploy.md, "Upgrades").
func (m *Main) upgrade(ctx context.Context, dsn string) error {
	if m.Config.MigrateAtStart || m.cluster != nil {
		m.Logger.Info("migrating the database")
	}
	// The embedded PostgreSQL is this server's own: always migrated.
	res, err := db.Upgrade(ctx, dsn, db.Options{Migrate: m.Config.MigrateAtStart || m.cluster != nil})
	if errors.Is(err, db.ErrSchemaBehind) {
		return fmt.Errorf("CONVO_MIGRATE_AT_START is false and %w", err)
	}
	if err != nil {
		return fmt.Errorf("migrate %s: %w", redact(dsn), err)
	}
	if res.Newer() {
		m.Logger.Info("the database was migrated by a newer release: serving without migrating, with its schema and functions",
			"database_migration", res.Database, "release_migration", res.Release)
	}
	return nil
}

// Run starts the database (when embedded), migrates it, and starts serving.
// It returns once the server listens; Close stops everything.
func (m *Main) Run(ctx context.Context) error {
	if m.Logger == nil {
		m.Logger = slog.Default()
	}
	m.metrics = newServerMetrics()
	var err error
	// First, so that what follows is traced; nothing is dialled yet.
	getenv := m.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if m.telemetry, err = telemetry.FromEnv(ctx, getenv, "convo"); err != nil {
		return err
	}
	if m.telemetry.Enabled() {
		m.Logger.Info("OpenTelemetry is on", "traces", m.telemetry.Traces, "metrics", m.telemetry.Metrics)
	}
	// A bucket that is missing or out of the keys' reach stops the start
	// before anything else does.
	if m.s3Blobs, err = m.Config.FileStorage.s3Blobs(ctx); err != nil {
		return err
	}
	dsn := m.Config.DatabaseURL
	if dsn == "" {
		if dsn, err = m.startEmbedded(ctx); err != nil {
			return err
		}
	}
	// The listener, the logical feed and the migrations (a session lock)
	// need sessions of their own: not through a transaction pooler.
	directDSN := m.Config.directDatabaseURL(dsn)
	if err := m.upgrade(ctx, directDSN); err != nil {
		return err
	}
	workerDSN := cmp.Or(m.Config.WorkerDatabaseURL, dsn)
	if m.cluster != nil && m.Config.WorkerDatabaseURL == "" {
		var err error
		if workerDSN, err = m.embeddedWorkerLogin(ctx, dsn); err != nil {
			return err
		}
	}
	poolConfig, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("database url: %w", err)
	}
	directConfig, err := pgxpool.ParseConfig(directDSN)
	if err != nil {
		return fmt.Errorf("direct database url (CONVO_DIRECT_DATABASE_URL): %w", err)
	}
	workerPoolConfig, err := pgxpool.ParseConfig(workerDSN)
	if err != nil {
		return fmt.Errorf("worker database url: %w", err)
	}
	pooled := m.Config.transactionPooled()
	if pooled {
		// No named prepared statements: PgBouncer would send the next
		// use of one to a server connection that never prepared it.
		postgres.ForTransactionPooler(poolConfig)
		postgres.ForTransactionPooler(workerPoolConfig)
	} else {
		// A branchSwitched carries at most a snapshot's worth of
		// messages: set on every session (behind a transaction pooler,
		// in each path change's transaction instead; below).
		postgres.SetSnapshotBytes(poolConfig, m.Config.SnapshotBytes)
		postgres.SetSnapshotBytes(workerPoolConfig, m.Config.SnapshotBytes)
	}
	// A value nested past encoding/json's limit reads (as a placeholder).
	postgres.KeepRawJSON(poolConfig)
	postgres.KeepRawJSON(workerPoolConfig)
	// openPool opens a pool of at most size connections to dsn.
	openPoolOf := func(config *pgxpool.Config, size int) (*pgxpool.Pool, error) {
		cfg := config.Copy()
		cfg.MaxConns = int32(size)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", redact(cfg.ConnString()), err)
		}
		return pool, nil
	}
	openPool := func(size int) (*pgxpool.Pool, error) { return openPoolOf(poolConfig, size) }
	if m.pool, err = openPool(m.Config.DBMaxConns); err != nil {
		return err
	}
	m.store = postgres.New(m.pool)
	// Before any stream is served: a restored database's seqs move past
	// what clients of the original read (docs/deploy.md, "Backups").
	restore, err := m.store.NoteDatabaseIdentity(ctx)
	if err != nil {
		return err
	}
	if restore.Restored {
		m.Logger.Warn("this database was restored from a backup or copied: every conversation's seq moved forward, so clients resuming from the original get a snapshot; the replies that were running failed",
			"conversations", restore.Conversations, "running", restore.Running)
	}
	if pooled {
		m.store.SetSnapshotBytes(m.Config.SnapshotBytes)
	}
	m.store.SetSearchTimeout(m.Config.Limits.SearchTimeout)
	if err := m.store.SetMaxPendingSends(m.Config.Limits.MaxPendingSends); err != nil {
		return err
	}
	m.fileStore = postgres.NewFileStore(m.pool)
	blobs, storage := m.fileBlobs()
	m.files = files.NewService(files.Options{
		Store: m.fileStore, Blobs: blobs, Storage: storage,
		Limits: m.Config.Files.limits(), Logger: m.Logger,
	})
	if err := m.store.CheckConnections(ctx, m.connectionUses()); err != nil {
		return err
	}
	// The hub reads live events on connections of its own, so that a
	// burst of RPCs or of new subscribers holding the API's pool never
	// holds up the events of the streams already open.
	if m.hubPool, err = openPool(hubConns); err != nil {
		return err
	}
	// Snapshots too: a reconnect storm's snapshots are read in groups on
	// these, and never hold the connections sends and live reads use.
	if m.snapshotPool, err = openPool(m.Config.SnapshotConns); err != nil {
		return err
	}
	m.snapshots = postgres.NewSnapshotReader(m.snapshotPool)
	m.metrics.registry.MustRegister(m.snapshots)
	if err := m.store.SetMaxActivePrompts(ctx, m.Config.Limits.MaxActivePrompts); err != nil {
		return fmt.Errorf("set the cap on prompts in flight: %w", err)
	}
	if m.fileURLs, err = m.Config.FileURLs.signer(ctx, m.store); err != nil {
		return err
	}
	m.metrics.registry.MustRegister(maintenance.QueueCollector{Store: m.store})
	m.metrics.registry.MustRegister(postgres.SendCollector{Store: m.store})
	if err := m.startBackground(ctx, directConfig.ConnConfig); err != nil {
		return err
	}
	workerConfig, err := builtin.Config(m.Config.Workers, m.Logger)
	if err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	workerConfig.Listener = m.pgListener
	workerConfig.Telemetry = m.telemetry
	if m.s3Blobs != nil {
		// Files in the bucket are read from it; files in PostgreSQL
		// (kept from before a switch to S3) still through file_chunk.
		workerConfig.Blobs = m.s3Blobs
	}
	// The app says replies come from the demo model only when they do:
	// this server's workers run, and a prompt naming no model gets it.
	m.demoModel = m.Config.Workers.Workers > 0 && workerConfig.Models.Default() == "demo"
	if m.Config.Workers.Workers > 0 {
		m.models = workerConfig.Models.Names()
	}
	// The workers write through a pool of their own, so that the API's
	// load never holds up a reply's writes, nor the workers' the API.
	workerDB := m.pool // unused without workers
	if m.Config.Workers.Workers > 0 {
		if m.workerPool, err = openPoolOf(workerPoolConfig, m.Config.Workers.DBConns); err != nil {
			return err
		}
		workerDB = m.workerPool
	}
	// The workers outlive ctx (SIGTERM ends it in main): Close drains them.
	if m.workers, err = worker.Start(context.WithoutCancel(ctx), workerDB, workerConfig); err != nil {
		return fmt.Errorf("start workers: %w", err)
	}
	m.metrics.registry.MustRegister(m.workers)
	if m.Config.Workers.Workers > 0 {
		// This server's workers claim what its sends queued at once,
		// without waiting for the notification's round trip.
		m.store.OnPromptsQueued(m.workers.Wake)
	}
	if m.Config.Workers.Workers == 0 {
		m.Logger.Info(noWorkersMessage)
	}
	m.Logger.Info("starting the web server", "addr", m.Config.HTTPAddr)

	if m.listener, err = net.Listen("tcp", m.Config.HTTPAddr); err != nil {
		return fmt.Errorf("listen on %s: %w", m.Config.HTTPAddr, err)
	}
	// A client that stops reading is cut off within the write timeout
	// even when what it was sent fits the kernel's buffers (stall.go).
	m.listener = watchStalls(m.listener, m.Config.WriteTimeout)
	authCtx, stopAuth := context.WithCancel(context.WithoutCancel(ctx))
	m.stopAuth = stopAuth
	if m.auth, err = m.newAuthenticator(authCtx); err != nil {
		return err
	}
	m.server = newHTTPServer(m.routes(), m.Logger)
	m.serveErr = make(chan error, 1)
	go func() { m.serveErr <- m.server.Serve(m.listener) }()
	if m.Config.AdminAddr != "" {
		if m.admin, err = metrics.ServeAdmin(m.Config.AdminAddr, m.metrics.registry, m.Logger); err != nil {
			return err
		}
	}
	if slices.Equal(m.Config.CORSOrigins, []string{"*"}) && m.Config.AuthSecret == "" && m.Config.AuthJWKSURL == "" {
		m.Logger.Warn("CONVO_CORS_ORIGINS=* without auth: any web page the user visits can read and write every conversation; list the app's origins instead")
	}
	if m.running != nil {
		if err := m.running.write(m.URL()); err != nil {
			m.Logger.Warn("a second convo on this data directory will not be told where this one serves", "err", err)
		}
	}
	if m.cluster != nil {
		// The URLs, with their passwords, are logged above.
		m.Logger.Info("convo is serving", "url", m.URL())
	} else {
		m.Logger.Info("convo is serving", "url", m.URL(), "database", redact(dsn))
	}
	m.Logger.Info(fmt.Sprintf("open %s in a browser", m.URL()))
	return nil
}

// telemetryFlushTimeout bounds the flush of telemetry at shutdown: a
// collector that does not answer costs the spans, not a hung shutdown.
const telemetryFlushTimeout = 5 * time.Second

// noWorkersMessage is logged at start with CONVO_WORKERS=0, so that a
// prompt that waits is not a surprise.
const noWorkersMessage = "no workers: prompts wait for an outside worker, for example `go run ./cmd/worker`"

// startBackground starts the stream hub, the feed (CONVO_FEED) that feeds
// it, and the reaper of expired prompt leases and the compactor (package
// maintenance).
func (m *Main) startBackground(ctx context.Context, connConfig *pgx.ConnConfig) error {
	m.hub = wire.NewHub(stream.HubOptions[*wire.Response]{Store: m.store, LiveStore: postgres.New(m.hubPool), Logger: m.Logger,
		Snapshots: m.snapshots, SnapshotBytes: m.Config.SnapshotBytes,
		Streams: limit.NewStreams(m.Config.Limits.MaxStreamsPerUser, m.Config.Limits.MaxStreams)}, m.fileURLs)
	m.metrics.registry.MustRegister(m.hub)
	m.pgListener = pglisten.New(pglisten.Options{ConnConfig: connConfig, Logger: m.Logger})
	listenCtx, stopListener := context.WithCancel(context.WithoutCancel(ctx))
	m.stopListener = stopListener
	m.background.Go(func() { m.pgListener.Run(listenCtx) })
	// Presence always travels by NOTIFY on the listener, whichever feed
	// streams use: it is never stored, so the WAL has none of it.
	m.presence = presence.New(presence.Options{Send: m.store.NotifyPresence, Publish: wire.PublishPresence(m.hub), Logger: m.Logger})
	m.presence.Listen(m.pgListener)
	feed, err := m.newFeed(ctx, connConfig)
	if err != nil {
		return err
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.stopBackground = cancel
	m.background.Go(func() { m.hub.Run(bg) })
	m.background.Go(func() { feed.Run(bg) })
	m.background.Go(func() { m.presence.Run(bg) })
	loops := maintenance.New(maintenance.Options{Store: m.store, CompactAfter: m.Config.CompactAfter, Logger: m.Logger,
		Files: m.files, FileGrace: m.Config.Files.Grace})
	m.metrics.registry.MustRegister(loops)
	m.background.Go(func() { loops.Run(bg) })
	m.background.Go(func() { returnIdleMemory(bg, m.Logger, memoryCheckInterval, idleMemoryBytes) })
	return nil
}

// authenticator returns the request authentication of the configuration,
// made once (its JWKS is refreshed until Close).
func (m *Main) authenticator() auth.Authenticator { return m.auth }

// newAuthenticator builds request authentication from the configuration;
// ctx bounds the JWKS's refreshes.
func (m *Main) newAuthenticator(ctx context.Context) (auth.Authenticator, error) {
	var opts []auth.Option
	if m.Config.AuthIssuer != "" {
		opts = append(opts, auth.WithIssuer(m.Config.AuthIssuer))
	}
	if m.Config.AuthAudience != "" {
		opts = append(opts, auth.WithAudience(m.Config.AuthAudience))
	}
	switch {
	case m.Config.AuthSecret != "":
		return auth.Authenticator{Verifier: auth.NewHS256(m.Config.AuthSecret, opts...)}, nil
	case m.Config.AuthJWKSURL != "":
		v, err := auth.NewJWKS(ctx, m.Config.AuthJWKSURL, opts...)
		if err != nil {
			return auth.Authenticator{}, fmt.Errorf("CONVO_AUTH_JWKS_URL: %w", err)
		}
		return auth.Authenticator{Verifier: v}, nil
	}
	return auth.Authenticator{}, nil
}

// hubConns is the size of the stream hub's own pool: it reads the event
// log one query at a time, and a second connection covers the
// deleted-conversation check after a feed reconnects.
const hubConns = 2

// connectionUses lists the connections this server opens to PostgreSQL,
// each bounded by its setting. The replication connection of the logical
// feed is a WAL sender, which max_wal_senders bounds instead. Behind a
// transaction pooler (CONVO_DB_POOL_MODE=transaction) the pools connect to
// the pooler, whose own pool size bounds what reaches PostgreSQL: only
// the listener counts.
func (m *Main) connectionUses() []postgres.ConnectionUse {
	if m.Config.transactionPooled() {
		return []postgres.ConnectionUse{{What: "listener", Conns: 1}}
	}
	uses := []postgres.ConnectionUse{
		{What: "API pool", Conns: m.Config.DBMaxConns, Setting: "CONVO_DB_MAX_CONNS"},
		{What: "stream hub", Conns: hubConns},
		{What: "snapshots", Conns: m.Config.SnapshotConns, Setting: "CONVO_SNAPSHOT_CONNS"},
	}
	if m.Config.Workers.Workers > 0 {
		uses = append(uses, postgres.ConnectionUse{What: "worker pool", Conns: m.Config.Workers.DBConns, Setting: "CONVO_WORKER_DB_CONNS"})
	}
	return append(uses, postgres.ConnectionUse{What: "listener", Conns: 1})
}

// startEmbedded starts (or reuses the data of) the private PostgreSQL and
// returns the connection string of its convo database. It refuses first,
// before touching PostgreSQL, when another convo serves on the data
// directory (running.go).
func (m *Main) startEmbedded(ctx context.Context) (string, error) {
	dataDir := m.Config.DataDir
	if dataDir == "" {
		var err error
		if dataDir, err = pgembed.DefaultDataDir(); err != nil {
			return "", fmt.Errorf("no DATABASE_URL, and no data directory for the embedded PostgreSQL: %w (set CONVO_DATA_DIR)", err)
		}
	}
	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("data directory %s: %w", dataDir, err)
	}
	// A data directory that holds no cluster yet must stay empty until
	// initdb has run: its running file is written after the start.
	if pgembed.HoldsCluster(dataDir) {
		if m.running, err = lockRunning(dataDir); err != nil {
			return "", err
		}
		m.Logger.Info("starting the embedded PostgreSQL", "data_dir", dataDir)
	} else {
		m.Logger.Info("starting the embedded PostgreSQL; its data directory is new", "data_dir", dataDir)
	}
	port := m.Config.EmbedPort
	cluster, err := pgembed.Start(ctx, pgembed.Options{
		DataDir: dataDir,
		Port:    port,
		// Unless a port is given for this start, the data directory
		// keeps the port of its first: saved URLs stay valid.
		KeepPort: !m.Config.embedPortGiven,
		Logical:  true,
		Logger:   m.Logger,
		// A killed or crashed postmaster is started again; the pools,
		// the listener and the feed reconnect by themselves.
		Supervise: true,
		// Room for this server's pools, and as much again for outside
		// workers and psql.
		MaxConnections: max(pgembed.DefaultMaxConnections, 2*postgres.TotalConnections(m.connectionUses())+10),
	})
	if taken, ok := errors.AsType[*pgembed.PortTakenError](err); ok {
		return "", fmt.Errorf("the embedded PostgreSQL did not start: port %d, which its data directory %s has used since its first start "+
			"(so that the URLs printed then keep working), is taken by another program. Stop that program "+
			"(`ss -ltnp 'sport = :%d'` shows it), or start this once on another port with CONVO_EMBED_PORT=<port> "+
			"(CONVO_EMBED_PORT=0: any free one), or remove %s to have the next start pick a new port and keep it",
			taken.Port, taken.DataDir, taken.Port, taken.File)
	}
	if err != nil {
		return "", fmt.Errorf("no DATABASE_URL, and the embedded PostgreSQL did not start: %w", err)
	}
	m.cluster = cluster
	if m.running == nil {
		if m.running, err = lockRunning(dataDir); err != nil {
			return "", err
		}
	}
	if err := cluster.CreateDatabase(ctx, "convo"); err != nil {
		return "", fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	return cluster.DSN("convo"), nil
}

// workerLoginRole and workerPasswordFile are the embedded default's login
// of the worker role, and the file of the data directory that keeps its
// password.
const (
	workerLoginRole    = "convo_worker_login"
	workerPasswordFile = "convo-worker-password"
)

// embeddedWorkerLogin gives the embedded PostgreSQL (migrated: the worker
// role exists) a login of the worker role for workers, and logs and prints
// both URLs: the worker's, which may only call the SQL worker API, and the
// superuser's (adminDSN), for psql. It returns the worker's.
func (m *Main) embeddedWorkerLogin(ctx context.Context, adminDSN string) (string, error) {
	workerDSN, err := m.cluster.Login(ctx, "convo", workerLoginRole, workerPasswordFile, db.WorkerRole)
	if err != nil {
		return "", fmt.Errorf("embedded PostgreSQL: a login for workers: %w", err)
	}
	m.Logger.Info("embedded PostgreSQL is running; workers connect with worker_database_url (the worker role: "+
		"the SQL worker API only), psql with admin_database_url (the superuser: everything)",
		"worker_database_url", workerDSN, "admin_database_url", adminDSN, "data_dir", m.cluster.DataDir())
	fmt.Fprintf(m.Stdout, "\nconvo database for workers: %s\nconvo database for psql (superuser): %s\n\n", workerDSN, adminDSN)
	return workerDSN, nil
}

// URL is the base URL the server answers on.
func (m *Main) URL() string {
	if m.listener == nil {
		return ""
	}
	return "http://" + m.listener.Addr().String()
}

// Close drains the server and stops it (see drain), closes the pool, and
// stops the embedded PostgreSQL. It is safe to call after a failed Run.
func (m *Main) Close() error {
	errs := []error{m.drain()}
	if m.stopAuth != nil {
		m.stopAuth()
	}
	if m.stopListener != nil {
		m.stopListener()
	}
	m.background.Wait()
	if m.workerPool != nil {
		m.workerPool.Close()
		m.workerPool = nil
	}
	if m.hubPool != nil {
		m.hubPool.Close()
		m.hubPool = nil
	}
	if m.snapshotPool != nil {
		m.snapshotPool.Close()
		m.snapshotPool = nil
	}
	if m.pool != nil {
		m.pool.Close()
		m.pool = nil
	}
	if m.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.cluster.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop embedded postgres: %w", err))
		}
		m.cluster = nil
	}
	if m.running != nil {
		m.running.release()
		m.running = nil
	}
	if m.telemetry != nil {
		// Last: the spans of the replies drained above are flushed.
		ctx, cancel := context.WithTimeout(context.Background(), telemetryFlushTimeout)
		defer cancel()
		if err := m.telemetry.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
		m.telemetry = nil
	}
	return errors.Join(errs...)
}

// redact hides the password of a connection string for logs.
func redact(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		if at := strings.Index(dsn[i+3:], "@"); at >= 0 {
			userinfo := dsn[i+3 : i+3+at]
			if colon := strings.Index(userinfo, ":"); colon >= 0 {
				return dsn[:i+3] + userinfo[:colon] + ":xxxxx" + dsn[i+3+at:]
			}
		}
	}
	return dsn
}
