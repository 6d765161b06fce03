package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/db"
	"github.com/convo-dev/convo/pgembed"
	"github.com/convo-dev/convo/postgres"
)

// Config is what to measure and how much. The defaults are the run quoted
// in docs/performance.md.
type Config struct {
	// DatabaseURL is a PostgreSQL to use instead of a private one. The bench
	// migrates it and writes conversations owned by benchOwner, which it
	// deletes at the end; use a scratch database.
	DatabaseURL string
	// Feeds are the stream feeds to compare: notify, logical.
	Feeds []string
	// Parts are the measurements to run: latency, throughput, memory.
	Parts []string

	// Subscribers are the fan-out sizes on one conversation.
	Subscribers []int
	// Via says how fan-out subscribers listen (see viaKinds): web and go
	// are real StreamConversation clients over h2c, hub is Hub.Open + Next.
	Via []string
	// Conversations active at once in the many-conversations scenario, each
	// with its own writer (one delta every ConversationInterval) and
	// SubscribersPerConversation clients of the first Connect kind in Via
	// (0 skips it).
	Conversations              int
	SubscribersPerConversation int
	ConversationInterval       time.Duration
	// Deltas is how many deltas each writer appends in a latency scenario,
	// one every Interval, of DeltaBytes bytes each.
	Deltas     int
	Interval   time.Duration
	DeltaBytes int
	// StreamsPerConn is how many streams one client HTTP/2 connection
	// carries (Go's server allows 250).
	StreamsPerConn int
	// ClientProcess runs the Connect clients of the latency scenarios in a
	// child process (on the same machine), so that they do not share the
	// server's Go scheduler; false runs them in this process.
	ClientProcess bool

	// Writers are the concurrencies of the throughput measurement. Each
	// runs Rounds times the API, then the baseline with and without NOTIFY
	// (alternating evens out drift of the machine), each for Duration after
	// a warm-up of a fifth of it.
	Writers  []int
	Duration time.Duration
	Rounds   int
	// DeltaSeq says how the throughput measurement calls append_block:
	// "without" delta_seq, "with" it (numbering each block's appends, as
	// the Go worker does), or both, each measured in every round.
	DeltaSeq []string

	// IdleSubscribers is how many idle streams the memory measurement holds.
	IdleSubscribers int

	// The peer measurement (peer.go): subscriber counts, conversations
	// they spread over, SQL writers, how long each count is measured, and
	// the idle subscribers whose server memory is read (0 skips it).
	PeerSubscribers []int
	PeerChannels    int
	PeerWriters     int
	PeerDuration    time.Duration
	PeerIdle        int
	// PeerResults names a file of the peer's own JSON lines (the push
	// server measured in the same shape) to print ratios against.
	PeerResults string
	// PeerPaced measures each size a second time with the writers held to
	// the peer's write rate at that size (from PeerResults), so that the
	// latencies compare at equal load.
	PeerPaced bool
	// ServerEnv is added to the environment of the cmd/api processes that
	// the peer and chat measurements start (for example raised stream
	// limits, or pool sizes); it wins over the bench's own settings.
	ServerEnv []string

	// The chat measurement (chat.go): reply counts (each with as many
	// workers and readers), how the readers follow their conversations,
	// the demo model's pace, and the bound on each reply.
	ChatReplies []int
	ChatVia     []string
	ChatTPS     float64
	ChatCap     time.Duration
	// ChatOrder are the orders of each reply's start to measure
	// (chatReadersFirst, chatSendFirst), ChatUsers whose the replies are:
	// "one" user for all, or one user "per-reply".
	ChatOrder []string
	ChatUsers []string
	// ChatProfile, when set, is a file prefix: each chat run writes the
	// server's CPU profile over ChatProfileWindow from the send
	// (<prefix>-<run>.pprof) and PostgreSQL's time per SQL function over
	// the whole run (track_functions 'all'; <prefix>-<run>-functions.txt).
	ChatProfile       string
	ChatProfileWindow time.Duration
	// PeerChatResults names a file of the peer's JSON lines for the chat
	// measurement (the AI SDK with resumable-stream in the same shape) to
	// print ratios against.
	PeerChatResults string
	// ChatReport names a file of the chat measurement's own JSON lines
	// (from earlier runs) to print the chat table and ratios of, measuring
	// nothing.
	ChatReport string

	// Fast runs the private PostgreSQL without fsync and synchronous_commit
	// (as the tests do; SynchronousCommit then sets the writers' own); it
	// is ignored with DatabaseURL.
	Fast bool
	// SynchronousCommit, when set, is the writers' synchronous_commit. With
	// "off", a commit's WAL is flushed by the WAL writer (every
	// wal_writer_delay), and logical decoding only sends flushed WAL.
	SynchronousCommit string
	Timeout           time.Duration
	// QuietWait is how long each measurement may wait for other processes
	// to leave the CPU (under 10 % of the machine for a second) before it
	// starts anyway; the CPU column shows what they took meanwhile.
	QuietWait  time.Duration
	CPUProfile string
	// MemProfile receives a heap profile taken while the idle Connect
	// streams of the memory measurement are open.
	MemProfile string
	LogLevel   string
}

// Main is the bench: ParseFlags, then Run, then Close.
type Main struct {
	Config Config
	Logger *slog.Logger
	// Stdout receives the report.
	Stdout io.Writer
	// Results holds what the last Run measured.
	Results Results

	dsn string // the database every pool and server uses
	// peerConversations are the peer measurement's (peer.go).
	peerConversations []uuid.UUID
	// chatConversationIDs are the chat measurement's (chat.go);
	// serverBin is cmd/api built once per run, chatAlone the reply time
	// of one reply alone.
	chatConversationIDs []uuid.UUID
	serverBin           string
	chatAlone           float64
	// cleanups run at Close, last first.
	cleanups []func() error
	tempDir  string           // holds the private PostgreSQL
	cluster  *pgembed.Cluster // nil with --database-url
	pool     *pgxpool.Pool    // the server's: store, hub, snapshots
	writers  *pgxpool.Pool    // the workers': append_block and the baseline
	store    *postgres.Store
	// notifyWas is the database's NOTIFY setting before the bench, which
	// Close restores.
	notifyWas *bool

	childMu  sync.Mutex
	children map[int]bool // running client processes

	wroteHeapProfile bool
}

// NewMain returns a Main with the default configuration.
func NewMain() *Main {
	return &Main{
		Config: Config{
			Feeds:                      knownFeeds,
			Parts:                      []string{"latency", "throughput", "memory"},
			Subscribers:                []int{1, 100, 1000},
			Via:                        []string{"web", "hub"},
			Conversations:              100,
			SubscribersPerConversation: 3,
			ConversationInterval:       100 * time.Millisecond,
			Deltas:                     200,
			Interval:                   20 * time.Millisecond,
			DeltaBytes:                 40,
			StreamsPerConn:             100,
			ClientProcess:              true,
			Writers:                    []int{4, 16},
			Duration:                   5 * time.Second,
			Rounds:                     3,
			DeltaSeq:                   deltaSeqModes,
			IdleSubscribers:            1000,
			PeerSubscribers:            []int{1, 100, 1000},
			PeerChannels:               10,
			PeerWriters:                4,
			PeerDuration:               10 * time.Second,
			PeerIdle:                   10_000,
			ChatReplies:                []int{100, 1000, 2000},
			ChatVia:                    []string{"sse", "connect"},
			ChatTPS:                    40,
			ChatCap:                    300 * time.Second,
			ChatOrder:                  []string{chatReadersFirst},
			ChatUsers:                  []string{chatOneUser},
			Fast:                       true,
			SynchronousCommit:          "on",
			Timeout:                    15 * time.Minute,
			LogLevel:                   "warn",
		},
		Stdout: os.Stdout,
	}
}

// ParseFlags reads the configuration from args.
func (m *Main) ParseFlags(args []string) error {
	c := &m.Config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: bench [flags]\n\nMeasures convo's streaming path (issue 4) and prints Markdown tables.\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "PostgreSQL to use (a scratch database: it is migrated and written to); empty: start a private one in a temporary directory")
	fs.Func("feeds", "feeds to compare, comma-separated: "+strings.Join(knownFeeds, ", ")+" (default "+strings.Join(c.Feeds, ",")+")", listFlag(&c.Feeds, knownFeeds))
	fs.Func("run", "measurements, comma-separated: latency, throughput, memory, peer, chat (default latency,throughput,memory)", listFlag(&c.Parts, knownParts))
	fs.Func("subscribers", "fan-out sizes on one conversation, comma-separated (default 1,100,1000)", intsFlag(&c.Subscribers))
	fs.Func("via", "how fan-out subscribers listen, comma-separated: web (StreamConversation over h2c, JSON, no compression: as connect-web), go (binary, gzip accepted: connect-go's defaults), hub (Hub.Open + Next in process) (default web,hub)", listFlag(&c.Via, viaKinds))
	fs.IntVar(&c.Conversations, "conversations", c.Conversations, "active conversations in the many-writers scenario (0: skip it)")
	fs.IntVar(&c.SubscribersPerConversation, "subscribers-per-conversation", c.SubscribersPerConversation, "Connect clients per conversation in the many-writers scenario")
	fs.DurationVar(&c.ConversationInterval, "conversation-interval", c.ConversationInterval, "time between each writer's deltas in the many-writers scenario")
	fs.IntVar(&c.Deltas, "deltas", c.Deltas, "deltas each writer appends per latency scenario")
	fs.DurationVar(&c.Interval, "interval", c.Interval, "time between a writer's deltas in the latency scenarios")
	fs.IntVar(&c.DeltaBytes, "delta-bytes", c.DeltaBytes, "bytes per delta (at least 8)")
	fs.IntVar(&c.StreamsPerConn, "streams-per-conn", c.StreamsPerConn, "Connect streams per client HTTP/2 connection")
	fs.BoolVar(&c.ClientProcess, "client-process", c.ClientProcess, "run the latency scenarios' Connect clients in a child process (false: in this one)")
	fs.Func("writers", "concurrent writers of the throughput measurement, comma-separated (default 4,16)", intsFlag(&c.Writers))
	fs.DurationVar(&c.Duration, "duration", c.Duration, "measured time of each throughput run")
	fs.IntVar(&c.Rounds, "rounds", c.Rounds, "alternating rounds of API and baseline runs per writer count")
	fs.Func("delta-seq", "how the throughput measurement calls append_block, comma-separated: without (no delta_seq), with (numbered appends, as the Go worker makes) (default without,with)", listFlag(&c.DeltaSeq, deltaSeqModes))
	fs.IntVar(&c.IdleSubscribers, "idle", c.IdleSubscribers, "idle subscribers held by the memory measurement")
	fs.Func("peer-subscribers", "peer measurement: subscriber counts, comma-separated (default 1,100,1000)", intsFlag(&c.PeerSubscribers))
	fs.IntVar(&c.PeerChannels, "peer-channels", c.PeerChannels, "peer measurement: conversations the subscribers and writes spread over")
	fs.IntVar(&c.PeerWriters, "peer-writers", c.PeerWriters, "peer measurement: concurrent SQL writers")
	fs.DurationVar(&c.PeerDuration, "peer-duration", c.PeerDuration, "peer measurement: how long the writers write at each subscriber count")
	fs.IntVar(&c.PeerIdle, "peer-idle", c.PeerIdle, "peer measurement: idle subscribers whose server memory is read (0: skip)")
	fs.StringVar(&c.PeerResults, "peer-results", c.PeerResults, "peer measurement: a file of the peer's JSON lines to print ratios against")
	fs.BoolVar(&c.PeerPaced, "peer-paced", c.PeerPaced, "peer measurement: measure each size again with the writers held to the peer's write rate (needs --peer-results)")
	fs.Func("chat-replies", "chat measurement: replies at once, comma-separated (default 100,1000,2000)", intsFlag(&c.ChatReplies))
	fs.Func("chat-via", "chat measurement: how each reader follows its conversation, comma-separated: sse (GET /v1/conversations/{id}/events), connect (StreamConversation, Connect protocol, JSON, HTTP/1.1), openai (POST /v1/responses, background and streamed: the send is the stream, so --chat-order does not apply; its events carry no commit time, so no lag) (default sse,connect)", listFlag(&c.ChatVia, chatVias))
	fs.Float64Var(&c.ChatTPS, "chat-tps", c.ChatTPS, "chat measurement: the demo model's tokens per second (CONVO_DEMO_TOKENS_PER_SECOND; negative: no pause)")
	fs.DurationVar(&c.ChatCap, "chat-cap", c.ChatCap, "chat measurement: a reply not completed this long after the messages are sent is unfinished")
	fs.Func("chat-order", "chat measurement: how each reply starts, comma-separated: readers-first (every reader subscribes, then every message is sent), send-first (each reader sends, then subscribes once SendMessage answered, resuming as a browser when its stream ends early) (default readers-first)", listFlag(&c.ChatOrder, chatOrders))
	fs.Func("chat-users", "chat measurement: whose the replies are, comma-separated: one (one user for all), per-reply (a user each) (default one)", listFlag(&c.ChatUsers, chatUserShapes))
	fs.StringVar(&c.ChatProfile, "chat-profile", c.ChatProfile, "chat measurement: a file prefix; each run writes the server's CPU profile from the send on (<prefix>-<run>.pprof) and PostgreSQL's time per SQL function (<prefix>-<run>-functions.txt)")
	fs.DurationVar(&c.ChatProfileWindow, "chat-profile-window", 3*time.Second, "chat measurement: how long the CPU profile of --chat-profile runs from the send")
	fs.StringVar(&c.PeerChatResults, "peer-chat-results", c.PeerChatResults, "chat measurement: a file of the peer's JSON lines to print ratios against")
	fs.StringVar(&c.ChatReport, "chat-report", c.ChatReport, "print the chat table (and ratios, with --peer-chat-results) of a file of the chat measurement's JSON lines, measuring nothing")
	fs.Func("server-env", "peer and chat measurements: NAME=value added to the cmd/api processes' environment (repeatable; wins over the bench's own)", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("%q: want NAME=value", v)
		}
		c.ServerEnv = append(c.ServerEnv, v)
		return nil
	})
	fs.BoolVar(&c.Fast, "fast", c.Fast, "private PostgreSQL without fsync and synchronous_commit, as in the tests")
	fs.StringVar(&c.SynchronousCommit, "synchronous-commit", c.SynchronousCommit, "synchronous_commit of the writers' sessions (on: as deployed; the logical feed only sees flushed WAL); empty: the server's")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "bound on the whole run")
	fs.DurationVar(&c.QuietWait, "quiet-wait", c.QuietWait, "how long each measurement may wait for other processes to leave the CPU (on a shared machine)")
	fs.StringVar(&c.CPUProfile, "cpuprofile", c.CPUProfile, "write a CPU profile of the run (the server process) to this file")
	fs.StringVar(&c.MemProfile, "memprofile", c.MemProfile, "write a heap profile, taken while the memory measurement's idle streams are open, to this file")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if len(c.DeltaSeq) == 0 {
		return errors.New("--delta-seq must name without, with or both")
	}
	if c.DeltaBytes < 8 {
		return errors.New("--delta-bytes must be at least 8 (a delta carries its index)")
	}
	if c.PeerChannels < 1 || c.PeerWriters < 1 || c.PeerDuration <= 0 || c.PeerIdle < 0 {
		return errors.New("--peer-channels, --peer-writers and --peer-duration must be positive, --peer-idle not negative")
	}
	if len(c.ChatVia) == 0 || len(c.ChatOrder) == 0 || len(c.ChatUsers) == 0 || len(c.ChatReplies) == 0 || slices.Contains(c.ChatReplies, 0) || c.ChatTPS == 0 || c.ChatCap <= 0 {
		return errors.New("--chat-via, --chat-order, --chat-users and --chat-replies must name something, --chat-replies counts be positive, --chat-tps not 0 and --chat-cap positive")
	}
	if c.PeerPaced && c.PeerResults == "" {
		return errors.New("--peer-paced needs --peer-results: the peer's write rates")
	}
	if c.Deltas < 1 || c.Interval <= 0 || c.ConversationInterval <= 0 || c.StreamsPerConn < 1 || c.Duration <= 0 || c.Rounds < 1 || c.Timeout <= 0 {
		return errors.New("--deltas, --interval, --conversation-interval, --streams-per-conn, --duration, --rounds and --timeout must be positive")
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

// listFlag parses a comma-separated list of known words.
func listFlag(dst *[]string, known []string) func(string) error {
	return func(v string) error {
		var out []string
		for w := range strings.SplitSeq(v, ",") {
			if w = strings.TrimSpace(w); w == "" {
				continue
			}
			if !slices.Contains(known, w) {
				return fmt.Errorf("%q: want one of %s", w, strings.Join(known, ", "))
			}
			out = append(out, w)
		}
		*dst = out
		return nil
	}
}

// intsFlag parses a comma-separated list of non-negative integers.
func intsFlag(dst *[]int) func(string) error {
	return func(v string) error {
		var out []int
		for w := range strings.SplitSeq(v, ",") {
			if w = strings.TrimSpace(w); w == "" {
				continue
			}
			n, err := strconv.Atoi(w)
			if err != nil || n < 0 {
				return fmt.Errorf("%q is not a count", w)
			}
			out = append(out, n)
		}
		*dst = out
		return nil
	}
}

// Run starts (or connects to) PostgreSQL, migrates it, runs every
// measurement for every feed, and prints the report.
func (m *Main) Run(ctx context.Context) error {
	if m.Logger == nil {
		m.Logger = slog.Default()
	}
	if m.Config.ChatReport != "" {
		return m.chatReport()
	}
	ctx, cancel := context.WithTimeout(ctx, m.Config.Timeout)
	defer cancel()
	if m.Config.CPUProfile != "" {
		f, err := os.Create(m.Config.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if err := m.open(ctx); err != nil {
		return err
	}
	env, err := m.environment(ctx)
	if err != nil {
		return err
	}
	m.Results = Results{Env: env}

	for _, feed := range m.Config.Feeds {
		if err := m.runFeed(ctx, feed); err != nil {
			m.Results.print(m.Stdout, m.Config) // what was measured before
			return fmt.Errorf("feed %s: %w", feed, err)
		}
	}
	m.Results.print(m.Stdout, m.Config)
	if m.Config.PeerResults != "" {
		if err := m.printPeerRatios(); err != nil {
			return err
		}
	}
	if m.Config.PeerChatResults != "" && len(m.Results.Chat) > 0 {
		return m.printChatRatios()
	}
	return nil
}

// knownParts are the measurements --run may name.
var knownParts = []string{"latency", "throughput", "memory", "peer", "chat"}

func (m *Main) runFeed(ctx context.Context, feed string) error {
	if err := m.setNotify(ctx, feed != "logical"); err != nil {
		return err
	}
	if m.wants("peer") {
		if err := m.runPeer(ctx, feed); err != nil {
			return fmt.Errorf("peer: %w", err)
		}
		// The cmd/api processes set NOTIFY as their feed wants it.
		if err := m.setNotify(ctx, feed != "logical"); err != nil {
			return err
		}
	}
	if m.wants("chat") {
		if err := m.runChat(ctx, feed); err != nil {
			return fmt.Errorf("chat: %w", err)
		}
		if err := m.setNotify(ctx, feed != "logical"); err != nil {
			return err
		}
	}
	if !m.wants("latency") && !m.wants("throughput") && !m.wants("memory") {
		return nil
	}
	sys, err := m.startSystem(ctx, feed)
	if err != nil {
		return err
	}
	defer sys.close()
	if m.wants("latency") {
		if err := m.runLatency(ctx, sys); err != nil {
			return fmt.Errorf("latency: %w", err)
		}
	}
	if m.wants("throughput") {
		if err := m.runThroughput(ctx, sys); err != nil {
			return fmt.Errorf("throughput: %w", err)
		}
	}
	if m.wants("memory") {
		if err := m.runMemory(ctx, sys); err != nil {
			return fmt.Errorf("memory: %w", err)
		}
	}
	return nil
}

func (m *Main) wants(part string) bool { return slices.Contains(m.Config.Parts, part) }

// open starts the private PostgreSQL unless a URL was given, migrates, and
// opens the pools.
func (m *Main) open(ctx context.Context) error {
	dsn := m.Config.DatabaseURL
	if dsn == "" {
		dir, err := os.MkdirTemp("", "convo-bench-*")
		if err != nil {
			return err
		}
		m.tempDir = dir
		// As root, PostgreSQL runs as the postgres user, which must reach
		// the data directory.
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
		m.cluster, err = pgembed.Start(ctx, pgembed.Options{
			DataDir: filepath.Join(dir, "data"), Port: 0, Logical: true, Fast: m.Config.Fast, Logger: m.Logger,
		})
		if err != nil {
			return err
		}
		if err := m.cluster.CreateDatabase(ctx, "convo"); err != nil {
			return err
		}
		dsn = m.cluster.DSN("convo")
	}
	m.dsn = dsn
	if err := db.Migrate(ctx, dsn); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("database url: %w", err)
	}
	cfg.MaxConns = 16
	// The chat measurement counts the server's backends: the bench's own
	// are named convo-bench….
	cfg.ConnConfig.RuntimeParams["application_name"] = "convo-bench"
	if m.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return err
	}
	m.store = postgres.New(m.pool)
	wcfg := cfg.Copy()
	wcfg.MaxConns = int32(max(40, slices.Max(append([]int{0}, m.Config.Writers...))))
	wcfg.ConnConfig.RuntimeParams["application_name"] = "convo-bench-writer"
	if c := m.Config.SynchronousCommit; c != "" {
		wcfg.ConnConfig.RuntimeParams["synchronous_commit"] = c
	}
	if m.writers, err = pgxpool.NewWithConfig(ctx, wcfg); err != nil {
		return err
	}
	was, err := notifySetting(ctx, m.pool)
	if err != nil {
		return err
	}
	m.notifyWas = &was
	return nil
}

// Close deletes what the bench wrote (with --database-url) or stops the
// private PostgreSQL and removes its directory.
func (m *Main) Close() error {
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := len(m.cleanups) - 1; i >= 0; i-- {
		errs = append(errs, m.cleanups[i]())
	}
	m.cleanups = nil
	if m.pool != nil && m.cluster == nil {
		errs = append(errs, m.cleanUp(ctx))
	}
	if m.writers != nil {
		m.writers.Close()
		m.writers = nil
	}
	if m.pool != nil {
		m.pool.Close()
		m.pool = nil
	}
	if m.cluster != nil {
		errs = append(errs, m.cluster.Stop(ctx))
		m.cluster = nil
	}
	if m.tempDir != "" {
		errs = append(errs, os.RemoveAll(m.tempDir))
		m.tempDir = ""
	}
	return errors.Join(errs...)
}
