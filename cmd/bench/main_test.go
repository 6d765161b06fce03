package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/convo-dev/convo/internal/pgtest"
)

func TestMain(m *testing.M) {
	// The bench re-runs this binary as its client process.
	if url := os.Getenv(clientProcessEnv); url != "" {
		if err := runClientProcess(context.Background(), url, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "client process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if url := os.Getenv(peerClientsEnv); url != "" {
		if err := runPeerClients(context.Background(), url, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "peer client process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if url := os.Getenv(chatReadersEnv); url != "" {
		if err := runChatReaders(context.Background(), url, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "chat reader process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	pgtest.Main(m)
}

// TestSmallRun runs every measurement of every feed with tiny sizes, so
// the bench keeps working as the code under it changes. Each throughput
// window is 250 ms: in 50 ms, on a machine loaded by other tests, a
// writer once completed no append at all.
func TestSmallRun(t *testing.T) {
	t.Parallel()
	m := NewMain()
	var out bytes.Buffer
	m.Stdout = &out
	m.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	err := m.ParseFlags([]string{
		"--database-url", pgtest.DSN(t),
		"--subscribers", "3", "--conversations", "2", "--subscribers-per-conversation", "2", "--conversation-interval", "2ms",
		"--deltas", "5", "--interval", "2ms", "--streams-per-conn", "2",
		"--writers", "2", "--duration", "250ms", "--rounds", "1", "--idle", "4",
	})
	if err != nil {
		t.Fatal(err)
	}
	runErr := m.Run(t.Context())
	if err := m.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if runErr != nil {
		t.Fatalf("run: %v\n%s", runErr, out.String())
	}
	t.Log(out.String())

	feeds := len(m.Config.Feeds)
	r := m.Results
	// Per feed: 3 subscribers via web and via hub, then 2 conversations ×
	// 2 via web.
	if len(r.Latency) != 3*feeds {
		t.Fatalf("%d latency results, want %d", len(r.Latency), 3*feeds)
	}
	for _, l := range r.Latency {
		if want := l.Conversations * l.SubscribersPerConversation * 5; l.Lost != 0 || l.Latency.N != want {
			t.Errorf("%s %d×%d via %s: %d samples and %d lost, want %d and none",
				l.Feed, l.Conversations, l.SubscribersPerConversation, l.Via, l.Latency.N, l.Lost, want)
		}
	}
	if len(r.Throughput) != feeds {
		t.Fatalf("%d throughput results, want %d", len(r.Throughput), feeds)
	}
	for _, tr := range r.Throughput {
		if tr.API <= 0 || tr.APISeq <= 0 || tr.Bare <= 0 || tr.BareNoNotify <= 0 {
			t.Errorf("%s: a rate is zero: %+v", tr.Feed, tr)
		}
	}
	if len(r.Memory) != 2*feeds {
		t.Fatalf("%d memory results, want %d", len(r.Memory), 2*feeds)
	}
	for _, want := range []string{"Commit-to-subscriber latency", "Sustained deltas per second", "Memory per idle subscriber"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--feeds", "carrier-pigeon"},
		{"--subscribers", "1,x"},
		{"--run", "latency,vibes"},
		{"--delta-bytes", "4"},
		{"--delta-seq", "sometimes"},
		{"--delta-seq", ""},
		{"--deltas", "0"},
		{"--chat-via", "websocket"},
		{"--chat-tps", "0"},
		{"--chat-replies", "0"},
		{"--chat-order", "whenever"},
		{"--chat-order", ""},
		{"--chat-users", "everyone"},
		{"--chat-users", ","},
		{"extra"},
	} {
		m := NewMain()
		m.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if err := m.ParseFlags(args); err == nil {
			t.Errorf("ParseFlags(%q) accepted", args)
		}
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	samples := make([]int64, 100)
	for i := range samples {
		samples[i] = int64(100 - i) // 100 … 1, unsorted
	}
	got := summarize(samples)
	if want := (Stats{N: 100, P50: 50, P99: 99, Max: 100}); got != want {
		t.Errorf("summarize(1…100) = %+v, want %+v", got, want)
	}
	if got := summarize(nil); got != (Stats{}) {
		t.Errorf("summarize(nil) = %+v, want zero", got)
	}
}

// TestPeerRun runs the peer measurement with tiny sizes on both feeds:
// every delta reaches every subscriber of its conversation in seq order,
// the idle measurement reads the server's memory, and the ratios against
// a peer's results are printed; the paced runs hold the peer's write rate.
func TestPeerRun(t *testing.T) {
	t.Parallel()
	peerFile := filepath.Join(t.TempDir(), "peer.jsonl")
	peerLines := `peer: a log line
{"mode":"centrifugo subs=3 channels=2","writes_per_s":100,"p50_ms":2,"p99_ms":4}
{"mode":"centrifugo idle","subs":5,"kb_per_sub":20}
`
	if err := os.WriteFile(peerFile, []byte(peerLines), 0o644); err != nil {
		t.Fatal(err)
	}
	m := NewMain()
	var out bytes.Buffer
	m.Stdout = &out
	m.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	err := m.ParseFlags([]string{
		"--database-url", pgtest.DSN(t), "--run", "peer",
		"--peer-subscribers", "3", "--peer-channels", "2", "--peer-writers", "2",
		"--peer-duration", "500ms", "--peer-idle", "5", "--peer-results", peerFile, "--peer-paced",
	})
	if err != nil {
		t.Fatal(err)
	}
	runErr := m.Run(t.Context())
	if err := m.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if runErr != nil {
		t.Fatalf("run: %v\n%s", runErr, out.String())
	}
	t.Log(out.String())
	feeds := len(m.Config.Feeds)
	if len(m.Results.Peer) != 3*feeds { // as fast as they can, paced, idle
		t.Fatalf("%d peer results, want %d", len(m.Results.Peer), 3*feeds)
	}
	paced := 0
	for _, r := range m.Results.Peer {
		if peerSize(r) == -1 {
			if r.Subs != 5 || r.RSSAfter <= 0 {
				t.Errorf("%s idle: %+v", r.Feed, r)
			}
			continue
		}
		if r.Expected == 0 || r.Deliveries != r.Expected || r.Gaps != 0 || r.WritesPerS <= 0 {
			t.Errorf("%s %s: %d of %d deliveries, %d gaps, %.0f writes/s", r.Feed, r.Mode, r.Deliveries, r.Expected, r.Gaps, r.WritesPerS)
		}
		if r.PacedTo > 0 {
			paced++
			// 100 writes/s over 500 ms: writes 0…49, due every 10 ms.
			if r.PacedTo != 100 || r.Writes > 50 || r.Writes < 25 {
				t.Errorf("%s %s: paced to %.0f/s, %d writes, want 100/s and at most 50", r.Feed, r.Mode, r.PacedTo, r.Writes)
			}
		}
	}
	if paced != feeds {
		t.Errorf("%d paced results, want one per feed", paced)
	}
	for _, want := range []string{"convo against the peer", "| notify | 3 | as fast as they can |", "| logical | 3 | at the peer's rate |", "KB per subscriber"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestChatRun runs the chat measurement with a tiny size at a fast demo
// pace, in both orders, of one user and of a user each: every reply
// finishes, every figure is there and sane, and the ratios against the
// peer's line of the matching reader are printed.
func TestChatRun(t *testing.T) {
	t.Parallel()
	peerFile := filepath.Join(t.TempDir(), "peer-chat.jsonl")
	peerLines := `peer: a log line
{"replies":3,"finished":3,"mean_reply_s":0.5,"gap_p99_ms":30,"lag_p50_ms":0.3,"lag_p99_ms":2,"server_cpu_s":0.2,"server_rss_mb":150,"first_delta_p50_ms":40,"first_delta_p99_ms":80,"reader":"post"}
{"replies":3,"finished":2,"mean_reply_s":0.6,"gap_p99_ms":31,"lag_p50_ms":0.4,"lag_p99_ms":3,"server_cpu_s":0.3,"server_rss_mb":160,"first_delta_p50_ms":50,"first_delta_p99_ms":90,"reader":"resume"}
`
	if err := os.WriteFile(peerFile, []byte(peerLines), 0o644); err != nil {
		t.Fatal(err)
	}
	m, out := runChatBench(t, "--chat-via", "sse", "--chat-order", "readers-first,send-first",
		"--chat-users", "one,per-reply", "--peer-chat-results", peerFile)
	t.Log(out)
	if len(m.Results.Chat) != 4 {
		t.Fatalf("%d chat results, want 4 (2 orders × 2 user shapes)", len(m.Results.Chat))
	}
	for _, r := range m.Results.Chat {
		checkChatResult(t, r)
	}
	for _, want := range []string{
		`{"mode":"convo chat replies=3 via=sse order=readers-first users=one"`,
		`{"mode":"convo chat replies=3 via=sse order=send-first users=per-reply"`,
		"| notify | sse | readers-first | one | 3 | 3 |", "| notify | sse | send-first | per-reply | 3 | 3 |",
		"convo against the peer",
		"| notify | sse | readers-first | one | 3 | post | 3 / 3 = 1.00 |",
		"| notify | sse | send-first | per-reply | 3 | resume | 3 / 2 = 1.50 |",
		"where the first delta's time goes", "| hub read | notified → read |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// checkChatResult checks the figures of one chat line of TestChatRun.
func checkChatResult(t *testing.T, r ChatResult) {
	t.Helper()
	if r.Replies != 3 || r.Finished != 3 || len(r.Errors) != 0 {
		t.Errorf("%s: %d of %d replies finished, errors %v", r.Mode, r.Finished, r.Replies, r.Errors)
	}
	if r.Feed != "notify" || !slices.Contains(chatVias, r.Via) || r.TokensPerS != 2000 || r.Start != chatStarts[r.Order] || r.Users == "" {
		t.Errorf("labels: %+v", r)
	}
	// The readers' per-reply times are for the parent only.
	if r.Timings != nil {
		t.Errorf("%s: timings left in the line: %v", r.Mode, r.Timings)
	}
	// A reply is reasoning, a tool call and text: many deltas, each at
	// least a character, none before its send, none after the wall time.
	// A reader that subscribes after sending may see the first of them
	// replayed in its snapshot, not counted.
	if r.Deltas < 3*3 || r.CharsPerDelta < 1 || r.WallS <= 0 || r.MeanReplyS <= 0 || r.MeanReplyS > r.WallS+0.05 || r.AloneS <= 0 {
		t.Errorf("%s: deltas %d, chars per delta %v, wall %v s, mean reply %v s, alone %v s", r.Mode, r.Deltas, r.CharsPerDelta, r.WallS, r.MeanReplyS, r.AloneS)
	}
	// A gap is 0 when two deltas of a reply arrive in one socket read (a
	// reader behind on a loaded machine): p50 may be 0, never negative.
	if r.GapP50 < 0 || r.GapP50 > r.GapP99 || r.GapP99 > r.GapMax || r.GapMax <= 0 {
		t.Errorf("%s: gaps p50 %v, p99 %v, max %v ms", r.Mode, r.GapP50, r.GapP99, r.GapMax)
	}
	if r.LagP50 < 0 || r.LagP50 > r.LagP99 || r.LagP99 > 5000 {
		t.Errorf("%s: lag p50 %v, p99 %v ms", r.Mode, r.LagP50, r.LagP99)
	}
	// A reply's first delta comes before its end, so within the wall time
	// (not the mean reply: the slowest reply's first delta can pass it);
	// SendMessage answers within it too.
	if r.FirstDeltaP50 <= 0 || r.FirstDeltaP50 > r.FirstDeltaP99 || r.FirstDeltaP99 > 1000*r.WallS {
		t.Errorf("%s: first delta p50 %v, p99 %v ms", r.Mode, r.FirstDeltaP50, r.FirstDeltaP99)
	}
	if r.SendP50 <= 0 || r.SendP50 > r.SendP99 || r.SendP99 > 1000*r.WallS {
		t.Errorf("%s: send p50 %v, p99 %v ms", r.Mode, r.SendP50, r.SendP99)
	}
	// In the order that sends first, the send is answered before the
	// reader even subscribes, so before its first delta.
	if r.Order == chatSendFirst && r.SendP50 > r.FirstDeltaP50 {
		t.Errorf("%s: send p50 %v ms after first delta p50 %v ms", r.Mode, r.SendP50, r.FirstDeltaP50)
	}
	// The server has its pool, its listener and 3 workers; the hub reads
	// and the workers' writes commit.
	if r.Connections < 2 || r.Walsenders != 0 || r.CommitsPerS <= 0 || r.WorkerTxPerS <= 0 || r.WriteTxPerS <= r.WorkerTxPerS {
		t.Errorf("%s: connections %d, walsenders %d, commits/s %v, write tx/s %v (workers %v)", r.Mode, r.Connections, r.Walsenders, r.CommitsPerS, r.WriteTxPerS, r.WorkerTxPerS)
	}
	if r.ServerCPUS < 0 || r.ServerRSSMB <= 0 || r.ServerLog == nil {
		t.Errorf("%s: server CPU %v s, RSS %v MB, log %v", r.Mode, r.ServerCPUS, r.ServerRSSMB, r.ServerLog)
	}
	checkChatStages(t, r)
}

// checkChatStages checks the first-delta breakdown of one chat line: every
// stage is there in order; the server's stages (claim to the stream) are
// measured for every reply of a reader subscribed first, whose first
// delta comes live, and for some when it subscribed after sending; no
// stage takes longer than the whole; the worker's stages never run
// backwards (one clock).
func checkChatStages(t *testing.T, r ChatResult) {
	t.Helper()
	if len(r.FirstDeltaStages) != len(chatStages) || r.FirstDeltaDropped != 0 {
		t.Fatalf("%s: stages %+v, dropped %d", r.Mode, r.FirstDeltaStages, r.FirstDeltaDropped)
	}
	total := r.FirstDeltaStages[len(chatStages)-1]
	if total.Stage != "total" || total.N != r.Replies || total.P99 != r.FirstDeltaP99 {
		t.Errorf("%s: total %+v, want the first delta's p99 %v over %d", r.Mode, total, r.FirstDeltaP99, r.Replies)
	}
	for i, f := range r.FirstDeltaStages {
		s := chatStages[i]
		if f.Stage != s.Name {
			t.Errorf("%s: stage %d is %q, want %q", r.Mode, i, f.Stage, s.Name)
		}
		want := r.Replies
		if r.Order == chatSendFirst && (s.Name == "notify" || s.Name == "hub read" || s.Name == "to stream" || s.Name == "write") {
			want = 1 // at least one reply's first delta came live
		}
		if f.N < want || f.N > r.Replies {
			t.Errorf("%s: stage %s measured over %d replies, want %d to %d", r.Mode, s.Name, f.N, want, r.Replies)
		}
		if f.P99 > total.P99+1 && s.Name != "send" {
			t.Errorf("%s: stage %s p99 %v ms beyond the total's %v", r.Mode, s.Name, f.P99, total.P99)
		}
		switch s.Name {
		case "claim", "start", "model", "to stream":
			if f.P50 < 0 || f.P50 > f.P99 {
				t.Errorf("%s: stage %s p50 %v, p99 %v ms", r.Mode, s.Name, f.P50, f.P99)
			}
		}
	}
}

// TestChatViaOpenAI runs the chat measurement through the Responses API:
// each reader's POST /v1/responses is its send and its stream, and the
// line holds the same figures as a stream's (lag aside: the Responses
// events carry no commit time).
func TestChatViaOpenAI(t *testing.T) {
	t.Parallel()
	m, _ := runChatBench(t, "--chat-via", "openai", "--chat-order", "readers-first", "--chat-users", "per-reply")
	if len(m.Results.Chat) != 1 || m.Results.Chat[0].Via != "openai" {
		t.Fatalf("chat results %+v, want one via openai", m.Results.Chat)
	}
	r := m.Results.Chat[0]
	checkChatResult(t, r)
	if r.LagP99 != 0 {
		t.Errorf("lag p99 %v ms through the Responses API, whose events carry no commit time", r.LagP99)
	}
}

// runChatBench runs the chat measurement of 3 replies at 2,000 tokens/s on
// a test database with the flags given besides, and returns the run and
// what it printed; a failed run fails the test.
func runChatBench(t *testing.T, flags ...string) (*Main, string) {
	t.Helper()
	m := NewMain()
	var out bytes.Buffer
	m.Stdout = &out
	m.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	args := append([]string{"--database-url", pgtest.DSN(t), "--run", "chat", "--feeds", "notify",
		"--chat-replies", "3", "--chat-tps", "2000", "--chat-cap", "60s"}, flags...)
	if err := m.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	runErr := m.Run(t.Context())
	if err := m.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if runErr != nil {
		t.Fatalf("run: %v\n%s", runErr, out.String())
	}
	return m, out.String()
}

func TestJSONStringLen(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{
		`abc"`: 3, `a\"b"`: 3, `\n\t"`: 2, `é€"`: 2, `\u00e9x"`: 2, `\ud83d\ude00"`: 2, `😀"`: 1, `no end`: 6,
	} {
		if got := jsonStringLen([]byte(in)); got != want {
			t.Errorf("jsonStringLen(%q) = %d, want %d", in, got, want)
		}
	}
}
