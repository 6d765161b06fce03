package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// The chat measurement (--run chat) puts a chat product's load on cmd/api:
// N conversations, each with its own reply streaming at the same time,
// each read by one tab. The server is cmd/api as deployed, a process of its
// own with N in-process workers running the built-in demo model at
// ChatTPS tokens a second and its limits off. For each size it creates N
// conversations (CreateConversation), opens one reader on each from a
// child process (this same binary: SSE or StreamConversation in the
// Connect protocol with JSON, each on its own HTTP/1.1 connection, as a
// browser tab), and once every reader has its snapshot the child sends
// one message into each conversation at once (SendMessage) and follows
// the replies until their promptCompleted. One reply alone is measured
// first, once per run, on a server of its own.
//
// It prints one JSON line per size and via, with the fields of the peer's
// own lines (the AI SDK with resumable-stream measured in the same shape)
// where they mean the same, then a Markdown table, then the ratios
// against the peer's lines when PeerChatResults names them.

// chatStarts say in what order a chat measurement starts its replies.
var chatStarts = map[string]string{
	chatReadersFirst: "readers subscribe (each to its own new conversation), then every message is sent at once",
	chatSendFirst:    "every message is sent at once, each reader subscribing once its SendMessage answered (resuming when its stream ends early)",
}

// chatOrders are the orders --chat-order may name; chatUserShapes the
// users --chat-users may.
var (
	chatOrders     = []string{chatReadersFirst, chatSendFirst}
	chatUserShapes = []string{chatOneUser, chatUserPerReply}
)

const (
	chatOneUser      = "one"
	chatUserPerReply = "per-reply"
)

// ChatResult is one line of the chat measurement.
type ChatResult struct {
	Mode       string  `json:"mode"`
	Feed       string  `json:"feed"`
	Via        string  `json:"via"`
	Order      string  `json:"order"`
	Users      string  `json:"users"`
	TokensPerS float64 `json:"tokens_per_s"`
	chatReadersResult
	// AloneS is the reply time of one reply alone (the run's first
	// measurement).
	AloneS float64 `json:"alone_s"`
	// CommitsPerS is the server database's xact_commit growth over the
	// wall time of the replies.
	CommitsPerS float64 `json:"commits_per_s"`
	// WriteTxPerS is the transactions per second that wrote (transaction
	// ids handed out over the run: every SendMessage, the workers'
	// claims and batches, nothing that only read), and WorkerTxPerS the
	// same without the replies' SendMessages: the worker process's
	// commits.
	WriteTxPerS float64 `json:"write_tx_per_s"`
	// DBCPUS is the CPU time of the private PostgreSQL over the replies
	// (0 with --database-url): the part of convo's work done there.
	DBCPUS       float64 `json:"db_cpu_s"`
	WorkerTxPerS float64 `json:"worker_tx_per_s"`
	// Connections and Walsenders are the most backends of the server seen
	// at once in pg_stat_activity (client backends, and walsenders of the
	// logical feed).
	Connections int `json:"connections_max"`
	Walsenders  int `json:"walsenders_max"`
	// ServerCPUS is the server process's CPU time over the replies;
	// ServerRSSMB its peak resident set size (VmHWM) since it started.
	ServerCPUS  float64 `json:"server_cpu_s"`
	ServerRSSMB float64 `json:"server_rss_mb"`
	// FirstDeltaStages is where the time from send to first delta went
	// (chatstages.go); FirstDeltaDropped counts what the server's timing
	// left out at its bounds.
	FirstDeltaStages  []ChatStageFigure `json:"first_delta_stages,omitempty"`
	FirstDeltaDropped int64             `json:"first_delta_dropped,omitempty"`
	// ServerLog counts the server's log lines (warnings and errors) by
	// level and message.
	ServerLog map[string]int `json:"server_log"`
	Start     string         `json:"start"`
}

// chatVias are how a chat reader may follow its conversation: "openai"
// sends through the Responses API (POST /v1/responses, background and
// streamed), whose answer is the reply's stream, so the order does not
// apply to it.
var chatVias = []string{"sse", "connect", "openai"}

// runChat runs the chat measurement for feed: one reply alone (once per
// run), then each size of ChatReplies through each of ChatVia, each on a
// fresh server process.
func (m *Main) runChat(ctx context.Context, feed string) error {
	c := m.Config
	if m.serverBin == "" {
		bin, err := m.buildServer(ctx)
		if err != nil {
			return err
		}
		m.serverBin = bin
	}
	if m.chatAlone == 0 {
		alone, err := m.chatRun(ctx, feed, 1, c.ChatVia[0], chatReadersFirst, chatOneUser)
		if err != nil {
			return fmt.Errorf("one reply alone: %w", err)
		}
		if alone.Finished != 1 {
			return fmt.Errorf("one reply alone did not finish: %v", alone.Errors)
		}
		m.chatAlone = alone.MeanReplyS
		m.Logger.Info("one reply alone", "seconds", alone.MeanReplyS, "deltas", alone.Deltas)
	}
	for _, n := range c.ChatReplies {
		for _, order := range c.ChatOrder {
			for _, users := range c.ChatUsers {
				for _, via := range c.ChatVia {
					res, err := m.chatRun(ctx, feed, n, via, order, users)
					if err != nil {
						return fmt.Errorf("%d replies via %s, %s, users %s: %w", n, via, order, users, err)
					}
					res.AloneS = m.chatAlone
					m.Results.Chat = append(m.Results.Chat, res)
					b, _ := json.Marshal(res)
					fmt.Fprintln(m.Stdout, string(b))
				}
			}
		}
	}
	return nil
}

// chatRun measures n replies at once, read via via, started in order, of
// one user or a user each, on a server of its own with n workers, which
// requires bearer tokens (HS256 with a secret picked here).
func (m *Main) chatRun(ctx context.Context, feed string, n int, via, order, users string) (ChatResult, error) {
	c := m.Config
	res := ChatResult{
		Mode: fmt.Sprintf("convo chat replies=%d via=%s order=%s users=%s", n, via, order, users), Feed: feed, Via: via,
		Order: order, Users: users, TokensPerS: c.ChatTPS, Start: chatStarts[order],
	}
	secret := rand.Text()
	tokens, err := chatTokens(secret, n, users)
	if err != nil {
		return res, err
	}
	admin, err := freeAddr()
	if err != nil {
		return res, err
	}
	prof, err := m.startChatProfile(ctx, fmt.Sprintf("%d-%s-%s-%s", n, via, order, users))
	if err != nil {
		return res, err
	}
	logs := newLogCounter(os.Stderr)
	srv, err := m.startServerWith(ctx, m.serverBin, feed, []string{
		"CONVO_WORKERS=" + strconv.Itoa(n),
		"CONVO_DEMO_TOKENS_PER_SECOND=" + strconv.FormatFloat(c.ChatTPS, 'f', -1, 64),
		"CONVO_AUTH_SECRET=" + secret,
		"CONVO_ADMIN_ADDR=" + admin,
	}, logs)
	if err != nil {
		return res, err
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			srv.stop()
		}
	}
	defer stop()
	ids, err := m.chatConversations(ctx, srv.url, tokens)
	if err != nil {
		return res, err
	}
	readers, err := startChatReaders(ctx, srv.url, chatReadersJob{Via: via, IDs: ids, CapMS: c.ChatCap.Milliseconds(), Order: order, Tokens: tokens})
	if err != nil {
		return res, err
	}
	defer readers.kill()
	if err := readers.expectLine("ready", 5*time.Minute); err != nil {
		return res, err
	}
	if _, err := firstDeltaTiming(ctx, "http://"+admin, http.MethodPost); err != nil {
		return res, err
	}

	sampler, err := m.startChatSampler(ctx)
	if err != nil {
		return res, err
	}
	defer sampler.close()
	pid := srv.cmd.Process.Pid
	cpu0, _, _ := procTimes(strconv.Itoa(pid))
	var db0 float64
	if m.cluster != nil {
		db0 = clusterTimes(m.cluster.DataDir())
	}
	if err := prof.sent(ctx, m, "http://"+admin); err != nil {
		return res, err
	}
	t0 := time.Now()
	if _, err := fmt.Fprintln(readers.stdin, "go"); err != nil {
		return res, err
	}
	line, err := readers.next(c.ChatCap + 2*time.Minute)
	if err != nil {
		return res, err
	}
	wall := time.Since(t0)
	cpu1, _, _ := procTimes(strconv.Itoa(pid))
	if m.cluster != nil {
		res.DBCPUS = round1((clusterTimes(m.cluster.DataDir()) - db0) / userHZ)
	}
	if err := json.Unmarshal([]byte(line), &res.chatReadersResult); err != nil {
		return res, fmt.Errorf("reader process said %q", line)
	}
	res.FirstDeltaStages, res.FirstDeltaDropped, err = m.chatBreakdown(ctx, "http://"+admin, ids, res.Timings)
	if err != nil {
		return res, err
	}
	res.Timings = nil
	if err := readers.wait(); err != nil {
		return res, fmt.Errorf("reader process: %w", err)
	}
	res.ServerCPUS = round1((cpu1 - cpu0) / userHZ)
	if hwm, err := procStatusKB(pid, "VmHWM"); err == nil {
		res.ServerRSSMB = round1(float64(hwm) / 1024)
	}
	var xids int64
	res.Connections, res.Walsenders, xids, err = sampler.finish()
	if err != nil {
		return res, err
	}
	// A backend reports its commits to pg_stat_database at most once a
	// second, and only at exit once idle: read the count once the server
	// and the sampler have left (the drain commits little).
	stop()
	commits, err := m.chatCommits(ctx, sampler.commits0)
	if err != nil {
		return res, err
	}
	if err := prof.finish(ctx, m, n); err != nil {
		return res, err
	}
	res.CommitsPerS = round1(float64(commits-sampler.queries) / wall.Seconds())
	res.WriteTxPerS = round1(float64(xids) / wall.Seconds())
	res.WorkerTxPerS = round1(float64(xids-int64(n)) / wall.Seconds())
	res.ServerLog = logs.counts()
	return res, nil
}

// chatTokens returns n bearer tokens signed HS256 with secret, valid for
// a day: of one user ("bench") for all, or of a user each ("bench-<i>").
func chatTokens(secret string, n int, users string) ([]string, error) {
	tokens := make([]string, n)
	exp := time.Now().Add(24 * time.Hour).Unix()
	for i := range tokens {
		sub := "bench"
		if users == chatUserPerReply {
			sub = "bench-" + strconv.Itoa(i)
		}
		if i > 0 && users != chatUserPerReply {
			tokens[i] = tokens[0]
			continue
		}
		t, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": exp}).SignedString([]byte(secret))
		if err != nil {
			return nil, fmt.Errorf("sign a token: %w", err)
		}
		tokens[i] = t
	}
	return tokens, nil
}

// chatConversations creates a conversation per token through the server,
// each as the token's user, which Close deletes.
func (m *Main) chatConversations(ctx context.Context, url string, tokens []string) ([]string, error) {
	n := len(tokens)
	transport := &http.Transport{MaxIdleConnsPerHost: 8}
	defer transport.CloseIdleConnections()
	client := convov1connect.NewConversationServiceClient(&http.Client{Transport: transport}, url)
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	next := make(chan int)
	for range min(n, 8) {
		wg.Go(func() {
			for i := range next {
				req := connect.NewRequest(&convov1.CreateConversationRequest{Title: "chat bench"})
				req.Header().Set("Authorization", "Bearer "+tokens[i])
				r, err := client.CreateConversation(ctx, req)
				if err != nil {
					errs[i] = fmt.Errorf("CreateConversation: %w", err)
					continue
				}
				ids[i] = r.Msg.GetConversation().GetId()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(m.chatConversationIDs) == 0 {
		m.cleanups = append(m.cleanups, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := m.pool.Exec(ctx, deleteConversationsByIDSQL, m.chatConversationIDs); err != nil {
				return fmt.Errorf("delete the chat measurement's conversations: %w", err)
			}
			return nil
		})
	}
	for _, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil {
			return nil, fmt.Errorf("CreateConversation: id %q: %w", id, err)
		}
		m.chatConversationIDs = append(m.chatConversationIDs, u)
	}
	return ids, nil
}

// startChatReaders starts the reader process (this same binary) on job.
func startChatReaders(ctx context.Context, url string, job chatReadersJob) (*peerClients, error) {
	c, err := startChild(ctx, chatReadersEnv, url)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(job)
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		c.kill()
		return nil, fmt.Errorf("reader process: %w", err)
	}
	return c, nil
}

// The chat measurement's statements on pg_stat_database and
// pg_stat_activity. The bench's own connections are named convo-bench…
// (the sampler's too) and left out.
const (
	chatCommitsSQL = `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`
	// chatXIDSQL is the next transaction id, read without taking one.
	chatXIDSQL      = `SELECT txid_snapshot_xmax(txid_current_snapshot())`
	chatBackendsSQL = `SELECT count(*) FILTER (WHERE backend_type = 'client backend'),
       count(*) FILTER (WHERE backend_type = 'walsender')
  FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid()
   AND coalesce(application_name, '') NOT LIKE 'convo-bench%'`
	// chatOthersSQL counts the backends other than this one and the
	// bench's pools: the server's, and the sampler until it has left.
	chatOthersSQL = `SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid()
   AND backend_type IN ('client backend', 'walsender')
   AND coalesce(application_name, '') NOT IN ('convo-bench', 'convo-bench-writer')`
)

// chatSampler reads the server's backends every chatSampleEvery on a
// connection of its own, until finish.
type chatSampler struct {
	conn     *pgx.Conn
	commits0 int64
	xid0     int64
	queries  int64 // its transactions, which count in xact_commit
	// quit stops the sampling between two queries: cancelling a query in
	// flight would close the connection, which finish reads on after.
	quit    chan struct{}
	done    chan error // the sampling's end, sent once
	ended   bool       // done was read
	conns   int
	walsend int
}

const chatSampleEvery = 150 * time.Millisecond

func (m *Main) startChatSampler(ctx context.Context) (*chatSampler, error) {
	cfg, err := pgx.ParseConfig(m.dsn)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = "convo-bench-sampler"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("sampler: %w", err)
	}
	s := &chatSampler{conn: conn, quit: make(chan struct{}), done: make(chan error, 1)}
	if err := conn.QueryRow(ctx, chatCommitsSQL).Scan(&s.commits0); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("read xact_commit: %w", err)
	}
	if err := conn.QueryRow(ctx, chatXIDSQL).Scan(&s.xid0); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("read the next transaction id: %w", err)
	}
	s.queries = 2
	go func() {
		t := time.NewTicker(chatSampleEvery)
		defer t.Stop()
		for {
			var c, w int
			if err := conn.QueryRow(ctx, chatBackendsSQL).Scan(&c, &w); err != nil {
				s.done <- err
				return
			}
			s.queries++
			s.conns, s.walsend = max(s.conns, c), max(s.walsend, w)
			select {
			case <-s.quit:
				s.done <- nil
				return
			case <-ctx.Done():
				s.done <- ctx.Err()
				return
			case <-t.C:
			}
		}
	}()
	return s, nil
}

// finish stops the sampling, closes the connection and returns the most
// client backends and walsenders seen, and the transaction ids handed out
// since the sampler started.
func (s *chatSampler) finish() (conns, walsenders int, xids int64, err error) {
	err = s.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer s.conn.Close(ctx) //nolint:errcheck // the figures are read
	if err != nil {
		return 0, 0, 0, fmt.Errorf("sample pg_stat_activity: %w", err)
	}
	if err := s.conn.QueryRow(ctx, chatXIDSQL).Scan(&xids); err != nil {
		return 0, 0, 0, fmt.Errorf("read the next transaction id: %w", err)
	}
	s.queries++
	return s.conns, s.walsend, xids - s.xid0, nil
}

// stop ends the sampling after its query in flight, if any, and returns
// why it ended (nil when stopped); later calls return nil.
func (s *chatSampler) stop() error {
	if s.ended {
		return nil
	}
	s.ended = true
	close(s.quit)
	return <-s.done
}

// close ends a sampler that finish did not.
func (s *chatSampler) close() {
	_ = s.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.conn.Close(ctx) //nolint:errcheck // best effort
}

// chatCommits waits (at most 30 s) until the server's and the sampler's
// backends have left, then returns the database's commits since from.
func (m *Main) chatCommits(ctx context.Context, from int64) (int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var others int
		if err := m.pool.QueryRow(ctx, chatOthersSQL).Scan(&others); err != nil {
			return 0, err
		}
		if others == 0 {
			break
		}
		if time.Now().After(deadline) {
			m.Logger.Warn("backends still connected; reading xact_commit anyway", "backends", others)
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	// A new transaction: the statistics snapshot of the last is gone.
	var to int64
	if err := m.pool.QueryRow(ctx, chatCommitsSQL).Scan(&to); err != nil {
		return 0, fmt.Errorf("read xact_commit: %w", err)
	}
	return to - from, nil
}

// logCounter passes a server's standard error on to w and counts its
// log lines by level and message (with the error, ids masked).
type logCounter struct {
	w   io.Writer
	mu  sync.Mutex
	buf []byte
	by  map[string]int
}

func newLogCounter(w io.Writer) *logCounter { return &logCounter{w: w, by: map[string]int{}} }

var (
	logFieldRE = regexp.MustCompile(`(level|msg|err|error)=("(?:[^"\\]|\\.)*"|\S+)`)
	logIDRE    = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b\d+\b`)
)

func (l *logCounter) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.count(string(l.buf[:i]))
		l.buf = l.buf[:copy(l.buf, l.buf[i+1:])]
	}
	l.mu.Unlock()
	return l.w.Write(p)
}

func (l *logCounter) count(line string) {
	f := map[string]string{}
	for _, m := range logFieldRE.FindAllStringSubmatch(line, -1) {
		if _, ok := f[m[1]]; !ok {
			f[m[1]] = strings.Trim(m[2], `"`)
		}
	}
	key := line
	if msg, ok := f["msg"]; ok {
		key = f["level"] + " " + msg
		if e := f["err"] + f["error"]; e != "" {
			key += ": " + e
		}
	}
	key = logIDRE.ReplaceAllString(key, "N")
	if len(key) > 160 {
		key = key[:160] + "…"
	}
	l.by[key]++
}

func (l *logCounter) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.by)
}

// chatReport prints the chat table of the lines in Config.ChatReport, and
// the ratios against Config.PeerChatResults when set.
func (m *Main) chatReport() error {
	b, err := os.ReadFile(m.Config.ChatReport)
	if err != nil {
		return fmt.Errorf("chat report: %w", err)
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		var r ChatResult
		if json.Unmarshal(line, &r) != nil || !strings.HasPrefix(r.Mode, "convo chat ") {
			continue // a log line, or another measurement's
		}
		m.Results.Chat = append(m.Results.Chat, r)
	}
	if len(m.Results.Chat) == 0 {
		return fmt.Errorf("chat report: no chat lines in %s", m.Config.ChatReport)
	}
	m.chatAlone = m.Results.Chat[0].AloneS
	printChat(m.Stdout, m.Results.Chat)
	printChatStages(m.Stdout, m.Results.Chat)
	if m.Config.PeerChatResults != "" {
		return m.printChatRatios()
	}
	return nil
}

// peerChatLine is what the chat ratios read of a peer's JSON line.
type peerChatLine struct {
	Replies     int     `json:"replies"`
	Finished    int     `json:"finished"`
	MeanReplyS  float64 `json:"mean_reply_s"`
	GapP99      float64 `json:"gap_p99_ms"`
	GapMax      float64 `json:"gap_max_ms"`
	LagP50      float64 `json:"lag_p50_ms"`
	LagP99      float64 `json:"lag_p99_ms"`
	DueLagP99   float64 `json:"due_lag_p99_ms"`
	ServerCPUS  float64 `json:"server_cpu_s"`
	RedisCPUS   float64 `json:"redis_cpu_s"`
	ServerRSSMB float64 `json:"server_rss_mb"`
	FirstP50    float64 `json:"first_delta_p50_ms"`
	FirstP99    float64 `json:"first_delta_p99_ms"`
	Reader      string  `json:"reader"`
}

// peerChatKey finds a peer's line: its reply count and its reader.
type peerChatKey struct {
	replies int
	reader  string
}

// peerReaders are the peer's readers that match the chat orders: its POST's
// own response is a tab subscribed before the reply starts; its resume
// (the POST dropped once its headers arrive, then GET …/stream) is a tab
// that subscribes after sending.
var peerReaders = map[string]string{chatReadersFirst: "post", chatSendFirst: "resume"}

// readPeerChatResults reads a file of the peer's JSON lines (other lines
// are its log) by reply count and reader (a line without one is "post",
// the peer's default); a later line of a count and reader wins.
func readPeerChatResults(path string) (map[peerChatKey]peerChatLine, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("peer chat results: %w", err)
	}
	peer := map[peerChatKey]peerChatLine{}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		var p peerChatLine
		if json.Unmarshal(line, &p) != nil || p.Replies == 0 {
			continue
		}
		if p.Reader == "" {
			p.Reader = "post"
		}
		peer[peerChatKey{p.Replies, p.Reader}] = p
	}
	if len(peer) == 0 {
		return nil, fmt.Errorf("peer chat results: no JSON lines with replies in %s", path)
	}
	return peer, nil
}

// printChatRatios prints the chat results against the peer's
// (Config.PeerChatResults), convo / peer.
func (m *Main) printChatRatios() error {
	peer, err := readPeerChatResults(m.Config.PeerChatResults)
	if err != nil {
		return err
	}
	w := m.Stdout
	fmt.Fprintf(w, "\n### Chat: convo against the peer (ratio convo / peer)\n\n")
	fmt.Fprintf(w, "Each cell: convo / peer = ratio. Finished: higher is better; every other column: lower is better. ")
	fmt.Fprintf(w, "The peer's lag starts when its model emits a token, convo's when a worker's batch is inserted (after up to CONVO_BATCH_INTERVAL of batching); ")
	fmt.Fprintf(w, "the peer's due lag (receive time minus when its model's schedule wanted the token) adds its server's lateness, which its lag leaves out. ")
	fmt.Fprintf(w, "The peer's mean reply starts at its POST's response headers, convo's when SendMessage is sent; each side's replies have their own length (convo's one reply alone: the table's \"alone\"). ")
	fmt.Fprintf(w, "First delta: from sending the message (SendMessage; the peer's POST) to the reply's first text delta read by the reader. ")
	fmt.Fprintf(w, "Each order is set against the peer's matching reader: readers-first against its POST's own response (post), send-first against its resume (the POST dropped once its headers arrive, then GET /chat/:id/stream). ")
	fmt.Fprintf(w, "CPU: convo's server and PostgreSQL; the peer's server and Redis.\n\n")
	fmt.Fprintln(w, "| feed | via | order | users | replies | peer reader | finished | mean reply s | first delta p50 ms | first delta p99 ms | gap p99 ms | gap max ms | lag p50 ms | lag p99 ms | peer due lag p99 ms | CPU s | server RSS MB |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	cell := func(a, b float64) string {
		if b == 0 {
			return fmt.Sprintf("%s / %s = –", num(a), num(b))
		}
		return fmt.Sprintf("%s / %s = %.2f", num(a), num(b), a/b)
	}
	for _, r := range m.Results.Chat {
		order := r.Order
		if order == "" {
			order = chatReadersFirst // a line of an older run
		}
		p, ok := peer[peerChatKey{r.Replies, peerReaders[order]}]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Feed, r.Via, order, orDash(r.Users), r.Replies, p.Reader,
			cell(float64(r.Finished), float64(p.Finished)), cell(r.MeanReplyS, p.MeanReplyS), cell(r.FirstDeltaP50, p.FirstP50), cell(r.FirstDeltaP99, p.FirstP99), cell(r.GapP99, p.GapP99),
			cell(r.GapMax, p.GapMax), cell(r.LagP50, p.LagP50), cell(r.LagP99, p.LagP99), num(p.DueLagP99),
			cell(round1(r.ServerCPUS+r.DBCPUS), round1(p.ServerCPUS+p.RedisCPUS)), cell(r.ServerRSSMB, p.ServerRSSMB))
	}
	return nil
}

// num prints a figure without needless decimals.
func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// errorCounts prints counts by message, most frequent first.
func errorCounts(by map[string]int) string {
	if len(by) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if by[a] != by[b] {
			return by[b] - by[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d× %s", by[k], strings.ReplaceAll(k, "|", "/"))
	}
	return strings.Join(parts, "; ")
}
