package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The peer measurement (--run peer) measures convo in the shape used to
// measure a push server next to it: the cmd/api process serving
// StreamConversation to clients shaped like browser tabs (Connect protocol,
// JSON, HTTP/1.1, one TCP connection each, all in one child process), fed
// by PeerWriters SQL writers calling convo.append_block as fast as they can
// on one streaming block in each of PeerChannels conversations. Write i goes
// to conversation i % PeerChannels; subscriber s follows conversation
// s % PeerChannels. Each delta carries the database's clock when the call
// began (clock_timestamp()); a subscriber subtracts it from its own clock.
//
// It prints one JSON line per measurement, with the fields of the peer's
// own lines (writes_per_s, p50_ms, p99_ms, max_ms, deliveries, expected,
// reordered), plus gaps: events a subscriber missed in its seq order,
// which must be 0.

// peerDeltaSQL appends the call's start time, in microseconds since the
// epoch, as the delta.
const peerDeltaSQL = `SELECT convo.append_block($1, ((extract(epoch FROM clock_timestamp()) * 1000000)::bigint)::text)`

// peerClientsEnv, when set (to the server's URL), makes the bench binary
// the peer measurement's client process: see runPeerClients.
const peerClientsEnv = "CONVO_BENCH_PEER_CLIENTS"

// peerOwner owns the peer measurement's conversations: the user of a
// cmd/api without auth.
const peerOwner = "local"

// PeerResult is one line of the peer measurement.
type PeerResult struct {
	Mode       string  `json:"mode"`
	Writes     int64   `json:"writes,omitempty"`
	WritesPerS float64 `json:"writes_per_s,omitempty"`
	Deliveries int64   `json:"deliveries,omitempty"`
	Expected   int64   `json:"expected,omitempty"`
	P50        float64 `json:"p50_ms,omitempty"`
	P99        float64 `json:"p99_ms,omitempty"`
	Max        float64 `json:"max_ms,omitempty"`
	Reordered  int64   `json:"reordered"`
	Gaps       int64   `json:"gaps"`
	DrainS     float64 `json:"drain_s,omitempty"`
	// PacedTo is the write rate the writers were held to (the peer's at
	// the same size), or 0 when they wrote as fast as they could.
	PacedTo float64 `json:"paced_to,omitempty"`
	// The idle measurement's fields.
	Subs      int     `json:"subs,omitempty"`
	RSSBefore int64   `json:"rss_before_kb,omitempty"`
	RSSAfter  int64   `json:"rss_after_kb,omitempty"`
	KBPerSub  float64 `json:"kb_per_sub,omitempty"`
	Feed      string  `json:"feed"`
}

// runPeer runs the peer measurement for feed: each size of PeerSubscribers
// on one server process, then the idle subscribers on a fresh one.
func (m *Main) runPeer(ctx context.Context, feed string) error {
	bin, err := m.buildServer(ctx)
	if err != nil {
		return err
	}
	srv, err := m.startServer(ctx, bin, feed)
	if err != nil {
		return err
	}
	var peer map[int]PeerResult
	if m.Config.PeerPaced {
		if peer, err = readPeerResults(m.Config.PeerResults); err != nil {
			srv.stop()
			return err
		}
	}
	for _, n := range m.Config.PeerSubscribers {
		rates := []float64{0} // as fast as the writers can
		if p, ok := peer[n]; ok && p.WritesPerS > 0 {
			rates = append(rates, p.WritesPerS)
		}
		for _, rate := range rates {
			res, err := m.peerLoad(ctx, srv, n, rate)
			if err != nil {
				srv.stop()
				return fmt.Errorf("%d subscribers: %w", n, err)
			}
			res.Feed = feed
			m.Results.Peer = append(m.Results.Peer, res)
			m.printPeer(res)
		}
	}
	srv.stop()
	if m.Config.PeerIdle == 0 {
		return nil
	}
	// A fresh process, so that memory kept from the load does not hide
	// the growth.
	if srv, err = m.startServer(ctx, bin, feed); err != nil {
		return err
	}
	defer srv.stop()
	res, err := m.peerIdle(ctx, srv, m.Config.PeerIdle)
	if err != nil {
		return fmt.Errorf("idle: %w", err)
	}
	res.Feed = feed
	m.Results.Peer = append(m.Results.Peer, res)
	m.printPeer(res)
	return nil
}

func (m *Main) printPeer(r PeerResult) {
	b, _ := json.Marshal(r)
	fmt.Fprintln(m.Stdout, string(b))
}

// peerLoad measures n subscribers over PeerChannels conversations under
// PeerWriters writers for PeerDuration: as fast as they can when rate is
// 0, else paced to rate writes per second between them.
func (m *Main) peerLoad(ctx context.Context, srv *serverProcess, n int, rate float64) (PeerResult, error) {
	c := m.Config
	replies := make([]reply, c.PeerChannels)
	for i := range replies {
		var err error
		if replies[i], err = m.peerReply(ctx); err != nil {
			return PeerResult{}, err
		}
	}
	ids := make([]string, n)
	for s := range ids {
		ids[s] = replies[s%len(replies)].conversationID.String()
	}
	clients, err := startPeerClients(ctx, srv.url, ids)
	if err != nil {
		return PeerResult{}, err
	}
	defer clients.kill()
	if err := clients.expectLine("ready", 5*time.Minute); err != nil {
		return PeerResult{}, err
	}

	perChannel := make([]atomic.Int64, len(replies))
	var writes atomic.Int64
	var wg sync.WaitGroup
	var writeErr error
	var errOnce sync.Once
	sched := newWriteSchedule(time.Now(), c.PeerDuration, rate)
	for range c.PeerWriters {
		wg.Go(func() {
			for ctx.Err() == nil {
				i, ok := sched.next()
				if !ok {
					return
				}
				ch := i % len(replies)
				if _, err := m.writers.Exec(ctx, peerDeltaSQL, replies[ch].blockID); err != nil {
					errOnce.Do(func() { writeErr = err })
					return
				}
				perChannel[ch].Add(1)
				writes.Add(1)
			}
		})
	}
	wg.Wait()
	if writeErr != nil {
		return PeerResult{}, fmt.Errorf("append_block: %w", writeErr)
	}
	var expected int64
	for s := range ids {
		expected += perChannel[s%len(replies)].Load()
	}
	drainStart := time.Now()
	if _, err := fmt.Fprintf(clients.stdin, "expect %d\n", expected); err != nil {
		return PeerResult{}, err
	}
	line, err := clients.next(2 * time.Minute)
	if err != nil {
		return PeerResult{}, err
	}
	var res PeerResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return PeerResult{}, fmt.Errorf("client process said %q", line)
	}
	res.Mode = fmt.Sprintf("convo subs=%d channels=%d", n, len(replies))
	if rate > 0 {
		res.Mode += fmt.Sprintf(" paced=%.0f", rate)
		res.PacedTo = rate
	}
	res.Writes = writes.Load()
	res.WritesPerS = float64(res.Writes) / c.PeerDuration.Seconds()
	res.Expected = expected
	res.DrainS = round2(time.Since(drainStart).Seconds())
	return res, clients.wait()
}

// writeSchedule hands the peer measurement's writers their write indexes
// until the end of the measurement: each at once when rate is 0, else
// write i at start + i/rate, so that the writers together hold rate writes
// per second (one that falls behind writes at once and catches up).
type writeSchedule struct {
	start, end time.Time
	rate       float64
	issued     atomic.Int64
}

func newWriteSchedule(start time.Time, d time.Duration, rate float64) *writeSchedule {
	return &writeSchedule{start: start, end: start.Add(d), rate: rate}
}

// next returns the next write's index once it is due, and false when the
// measurement is over.
func (s *writeSchedule) next() (int, bool) {
	i := s.issued.Add(1) - 1
	due := time.Now()
	if s.rate > 0 {
		due = s.start.Add(time.Duration(float64(i) / s.rate * float64(time.Second)))
	}
	if !due.Before(s.end) {
		return 0, false
	}
	time.Sleep(time.Until(due))
	return int(i), true
}

// peerIdle opens n streams on one conversation and reads how much the
// server process's resident memory grew.
func (m *Main) peerIdle(ctx context.Context, srv *serverProcess, n int) (PeerResult, error) {
	r, err := m.peerReply(ctx)
	if err != nil {
		return PeerResult{}, err
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = r.conversationID.String()
	}
	time.Sleep(time.Second) // as the peer: let the fresh process settle
	before, err := rssKB(srv.cmd.Process.Pid)
	if err != nil {
		return PeerResult{}, err
	}
	clients, err := startPeerClients(ctx, srv.url, ids)
	if err != nil {
		return PeerResult{}, err
	}
	defer clients.kill()
	if err := clients.expectLine("ready", 5*time.Minute); err != nil {
		return PeerResult{}, err
	}
	time.Sleep(2 * time.Second)
	after, err := rssKB(srv.cmd.Process.Pid)
	if err != nil {
		return PeerResult{}, err
	}
	return PeerResult{Mode: "convo idle", Subs: n, RSSBefore: before, RSSAfter: after,
		KBPerSub: round2(float64(after-before) / float64(n))}, nil
}

func round2(f float64) float64 { return float64(int64(f*100)) / 100 }

// rssKB reads a process's resident set size (VmRSS) in KiB.
func rssKB(pid int) (int64, error) { return procStatusKB(pid, "VmRSS") }

// procStatusKB reads a field in KiB of /proc/PID/status: VmRSS, VmHWM (the
// peak resident set size).
func procStatusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// serverProcess is cmd/api running as its own process, as deployed.
type serverProcess struct {
	cmd  *exec.Cmd
	url  string
	done chan error
}

// buildServer builds cmd/api into the bench's temporary directory.
func (m *Main) buildServer(ctx context.Context) (string, error) {
	dir, err := os.MkdirTemp("", "convo-bench-api-*")
	if err != nil {
		return "", err
	}
	m.cleanups = append(m.cleanups, func() error { return os.RemoveAll(dir) })
	bin := filepath.Join(dir, "convo-api")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/convo-dev/convo/cmd/api")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build cmd/api: %w\n%s", err, out)
	}
	return bin, nil
}

// startServer runs bin on a free port against the bench's database, with
// no workers and no compaction, and waits for /healthz.
func (m *Main) startServer(ctx context.Context, bin, feed string) (*serverProcess, error) {
	return m.startServerWith(ctx, bin, feed, nil, os.Stderr)
}

// startServerWith is startServer with env added to the process's
// environment (before Config.ServerEnv, which wins) and its standard
// error written to stderr.
func (m *Main) startServerWith(ctx context.Context, bin, feed string, env []string, stderr io.Writer) (*serverProcess, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin)
	// One user holds every subscriber: the per-user and per-server limits
	// (streams, write rate, prompts in flight) are off, as the measured
	// server has none.
	cmd.Env = append(os.Environ(), "DATABASE_URL="+m.dsn, "CONVO_HTTP_ADDR="+addr, "CONVO_FEED="+feed,
		"CONVO_WORKERS=0", "CONVO_COMPACT_AFTER=0", "CONVO_LOG_LEVEL=warn",
		"CONVO_MAX_STREAMS_PER_USER=0", "CONVO_MAX_STREAMS=0", "CONVO_WRITE_RATE=0", "CONVO_MAX_ACTIVE_PROMPTS=0")
	cmd.Env = append(cmd.Env, env...)
	cmd.Env = append(cmd.Env, m.Config.ServerEnv...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &serverProcess{cmd: cmd, url: "http://" + addr, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := http.Get(p.url + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case err := <-p.done:
			return nil, fmt.Errorf("cmd/api exited: %v", err)
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, errors.New("cmd/api did not answer /healthz within a minute")
		}
	}
}

// stop sends SIGTERM (the drain) and waits; a process that does not exit
// within the drain's bounds is killed.
func (p *serverProcess) stop() {
	p.cmd.Process.Signal(os.Interrupt) //nolint:errcheck // it may have exited
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill() //nolint:errcheck // it may have exited
		<-p.done
	}
}

// peerClients is the child process of the peer measurement.
type peerClients struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan error
}

func startPeerClients(ctx context.Context, url string, ids []string) (*peerClients, error) {
	c, err := startChild(ctx, peerClientsEnv, url)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriter(c.stdin)
	fmt.Fprintln(w, len(ids))
	for _, id := range ids {
		fmt.Fprintln(w, id)
	}
	if err := w.Flush(); err != nil {
		c.kill()
		return nil, fmt.Errorf("client process: %w", err)
	}
	return c, nil
}

// startChild starts this same binary as a child process in the role that
// env (set to url) selects, its standard output read line by line.
func startChild(ctx context.Context, env, url string) (*peerClients, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), env+"="+url)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &peerClients{cmd: cmd, stdin: stdin, lines: make(chan string, 4), done: make(chan error, 1)}
	go func() {
		defer close(c.lines)
		r := bufio.NewScanner(stdout)
		r.Buffer(nil, 1<<20)
		for r.Scan() {
			c.lines <- r.Text()
		}
	}()
	return c, nil
}

func (c *peerClients) next(limit time.Duration) (string, error) {
	select {
	case line, ok := <-c.lines:
		if !ok {
			return "", errors.New("client process ended")
		}
		if msg, ok := strings.CutPrefix(line, "error "); ok {
			return "", fmt.Errorf("client process: %s", msg)
		}
		return line, nil
	case <-time.After(limit):
		return "", timeoutf("client process silent for %v", limit)
	}
}

func (c *peerClients) expectLine(want string, limit time.Duration) error {
	line, err := c.next(limit)
	if err != nil {
		return err
	}
	if line != want {
		return fmt.Errorf("client process said %q, want %q", line, want)
	}
	return nil
}

// wait closes the child's stdin (it then exits) and waits for it.
func (c *peerClients) wait() error {
	c.stdin.Close()
	for range c.lines {
	}
	return c.cmd.Wait()
}

// kill ends the child at once; after wait it does nothing.
func (c *peerClients) kill() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Kill() //nolint:errcheck // it may have exited
		c.stdin.Close()
		for range c.lines {
		}
		c.cmd.Wait() //nolint:errcheck // killed
	}
}

// peerReply makes a streaming reply for the peer measurement and records
// its conversation, which Close deletes.
func (m *Main) peerReply(ctx context.Context) (reply, error) {
	r, err := m.newReplyFor(ctx, peerOwner)
	if err != nil {
		return reply{}, err
	}
	if len(m.peerConversations) == 0 {
		m.cleanups = append(m.cleanups, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := m.pool.Exec(ctx, deleteConversationsByIDSQL, m.peerConversations); err != nil {
				return fmt.Errorf("delete the peer measurement's conversations: %w", err)
			}
			return nil
		})
	}
	m.peerConversations = append(m.peerConversations, r.conversationID)
	return r, nil
}

// readPeerResults reads a file of the peer's JSON lines (other lines are
// its log) into its results by subscriber count, the idle one under -1.
func readPeerResults(path string) (map[int]PeerResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("peer results: %w", err)
	}
	defer f.Close()
	peer := map[int]PeerResult{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r PeerResult
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Mode == "" {
			continue // a log line
		}
		peer[peerSize(r)] = r
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("peer results: %w", err)
	}
	if len(peer) == 0 {
		return nil, fmt.Errorf("peer results: no JSON lines with a mode in %s", path)
	}
	return peer, nil
}

// printPeerRatios prints convo's peer results next to the peer's own
// (Config.PeerResults), with the ratios the targets are stated in.
func (m *Main) printPeerRatios() error {
	peer, err := readPeerResults(m.Config.PeerResults)
	if err != nil {
		return err
	}
	w := m.Stdout
	fmt.Fprintf(w, "\n### convo against the peer (ratio convo / peer)\n\n")
	fmt.Fprintf(w, "| feed | subscribers | writers | writes/s convo / peer | ratio (target ≥ 1) | p50 ms convo / peer | ratio (≤ 1) | p99 ms convo / peer | ratio (≤ 1) |\n|---|---|---|---|---|---|---|---|---|\n")
	ratio := func(a, b float64) string {
		if b == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	for _, r := range m.Results.Peer {
		n := peerSize(r)
		p, ok := peer[n]
		if !ok || n < 0 {
			continue
		}
		writers := "as fast as they can"
		if r.PacedTo > 0 {
			writers = "at the peer's rate"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f / %.0f | %s | %.1f / %.1f | %s | %.1f / %.1f | %s |\n", r.Feed, n, writers,
			r.WritesPerS, p.WritesPerS, ratio(r.WritesPerS, p.WritesPerS),
			r.P50, p.P50, ratio(r.P50, p.P50), r.P99, p.P99, ratio(r.P99, p.P99))
	}
	if p, ok := peer[-1]; ok {
		fmt.Fprintf(w, "\n| feed | idle subscribers | KB per subscriber convo / peer | ratio (target ≤ 0.75) |\n|---|---|---|---|\n")
		for _, r := range m.Results.Peer {
			if peerSize(r) == -1 {
				fmt.Fprintf(w, "| %s | %d | %.1f / %.1f | %s |\n", r.Feed, r.Subs, r.KBPerSub, p.KBPerSub, ratio(r.KBPerSub, p.KBPerSub))
			}
		}
	}
	return nil
}

// peerSize is a result's subscriber count, read from its mode ("… subs=N
// …"), or -1 for an idle measurement.
func peerSize(r PeerResult) int {
	if strings.HasSuffix(r.Mode, " idle") {
		return -1
	}
	for f := range strings.FieldsSeq(r.Mode) {
		if v, ok := strings.CutPrefix(f, "subs="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return 0
}
