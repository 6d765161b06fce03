package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/pgembed"
	"github.com/convo-dev/convo/pglisten"
	"github.com/convo-dev/convo/postgres"
)

// The fault soak: writers stream replies through the SQL worker API (two
// of them several replies per transaction, with convo.write_batch) into a
// few conversations while subscribers follow them over Connect and SSE
// (joining at random moments, dropping and resuming, some reading slowly)
// from two servers, and a driver injects faults at random: the LISTEN
// connections are killed, every backend is terminated, PostgreSQL
// restarts, a server is stopped with SIGTERM and a new one started,
// compaction runs; hostile clients send values convo's rule for accepted
// JSON refuses (1e400, nesting past 64, \u0000) to every door, each of
// which must be refused 400 invalid_argument, none stored. At the end every
// subscriber's blocks must equal the conversation's, with no seq skipped or
// repeated. CONVO_SOAK_DURATION (default 20s), CONVO_SOAK_SUBSCRIBERS
// (default 200) and CONVO_SOAK_FEEDS size it; docs/operations.md shows a
// long run.
func TestFaultSoak(t *testing.T) {
	t.Parallel()
	duration := 20 * time.Second
	if v := os.Getenv("CONVO_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CONVO_SOAK_DURATION: %v", err)
		}
		duration = d
	}
	subscribers := 200
	if v := os.Getenv("CONVO_SOAK_SUBSCRIBERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			t.Fatalf("CONVO_SOAK_SUBSCRIBERS: %q", v)
		}
		subscribers = n
	}
	// CONVO_SOAK_FEEDS (default both): the feeds to soak, one after the
	// other (each loads both cores).
	feeds := []string{feedNotify, feedLogical}
	if v := os.Getenv("CONVO_SOAK_FEEDS"); v != "" {
		feeds = strings.Split(v, ",")
	}
	for _, feed := range feeds {
		if checkFeed(feed) != nil {
			t.Fatalf("CONVO_SOAK_FEEDS: %q is not a feed", feed)
		}
		t.Run(feed, func(t *testing.T) { soakFeed(t, feed, duration, subscribers) })
	}
}

func soakFeed(t *testing.T, feed string, duration time.Duration, subscribers int) {
	ctx, cancel := context.WithTimeout(context.Background(), duration+4*time.Minute)
	defer cancel()

	// Durable (fsync and synchronous_commit on, as deployed): a restart
	// is an immediate shutdown, and a fast cluster would lose commits
	// that subscribers had already been sent.
	cluster, err := pgembed.Start(ctx, pgembed.Options{
		DataDir: filepath.Join(tempDirFor(t, "postgres"), "pgdata"), Logical: feed == feedLogical, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Stop(context.Background()) }) //nolint:errcheck
	if err := cluster.CreateDatabase(ctx, "convo"); err != nil {
		t.Fatal(err)
	}
	dsn := cluster.DSN("convo")
	// The soak's server is built without the race detector, unlike the
	// other process tests' (testbin.Build): it is the soak's load, not its
	// code, under test, and a race-built server under the soak's faults
	// paces the feeds differently from the servers people run.
	bin := filepath.Join(t.TempDir(), "api")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	env := []string{"DATABASE_URL=" + dsn, "CONVO_FEED=" + feed, "CONVO_WORKERS=0", "CONVO_DRAIN_GRACE=200ms",
		"CONVO_MAX_ACTIVE_PROMPTS=0", "CONVO_MAX_STREAMS_PER_USER=0", "CONVO_MAX_STREAMS=0", "CONVO_WRITE_RATE=1000"}
	// With pgtest.Pooler, the servers' pools and the writers' go through
	// a PgBouncer in transaction mode, the servers' feeds and migrations
	// directly, as deployed behind one.
	poolURL := dsn
	if pgtest.Pooler(t) {
		poolURL = pgtest.PgBouncer(t, dsn)[0]
		env = append(env, "DATABASE_URL="+poolURL, "CONVO_DB_POOL_MODE=transaction", "CONVO_DIRECT_DATABASE_URL="+dsn)
	}
	s := &soak{t: t, dsn: dsn, env: env, bin: bin, cluster: cluster}
	s.servers = []*serverProcess{startProcess(t, bin, env...), startProcess(t, bin, env...)}
	poolConfig, err := pgxpool.ParseConfig(poolURL)
	if err != nil {
		t.Fatal(err)
	}
	if pgtest.Pooler(t) {
		postgres.ForTransactionPooler(poolConfig)
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s.pool = pool

	// The conversations, each with a first exchange.
	const conversations = 4
	for range conversations {
		var id string
		if err := pool.QueryRow(ctx, `SELECT conversation_id::text FROM convo.send_message('local', NULL, 'soak', '[{}]')`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		s.conversations = append(s.conversations, id)
	}

	run, stopRun := context.WithCancel(ctx)
	var writers, readers sync.WaitGroup
	// Two writers write as the worker runtime does, several replies per
	// transaction (convo.write_batch); one calls the single functions, as
	// a simple worker would.
	for w := range 3 {
		if w < 2 {
			writers.Go(func() { s.writeBatches(run, w) })
		} else {
			writers.Go(func() { s.write(run, w) })
		}
	}
	// Hostile clients send values convo's rule for accepted JSON refuses
	// (1e400, nesting past 64, \u0000) through every door, meanwhile.
	var hostile hostileStats
	for range 3 {
		writers.Go(func() { s.hostile(run, &hostile) })
	}
	subs := make([]*soakSubscriber, subscribers)
	for i := range subs {
		subs[i] = &soakSubscriber{s: s, conversation: s.conversations[i%conversations], sse: i%2 == 1, blocks: map[string]*strings.Builder{}}
		readers.Go(func() {
			// Join at a random moment of the first half.
			sleep(run, time.Duration(rand.Int64N(int64(duration/2))))
			subs[i].follow(run)
		})
	}
	faults := s.inject(run, duration)
	// Writers stop between calls, never in one: a call cancelled on the
	// client may still commit, after the last seq is read below. They end
	// the replies they hold first, so that no block streams at the end: a
	// subscriber stopped between a snapshot and its replay (stopRun below)
	// would hold a view its client knows to be partial (replayOpen) and
	// reads again from a snapshot.
	s.stop.Store(true)
	writers.Wait()

	if hostile.refused.Load() == 0 {
		t.Errorf("no hostile request was refused (%d unreachable)", hostile.unreachable.Load())
	}
	if err := s.checkStoredValues(ctx); err != nil {
		t.Errorf("stored values break the rule for accepted JSON: %v", err)
	}

	// Let every subscriber catch up with its conversation's last seq.
	last := map[string]int64{}
	for _, id := range s.conversations {
		var seq int64
		if err := pool.QueryRow(ctx, `SELECT last_seq FROM convo.conversations WHERE id = $1`, id).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		last[id] = seq
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		behind := 0
		for _, sub := range subs {
			if sub.seqNow() != last[sub.conversation] {
				behind++
			}
		}
		if behind == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d of %d subscribers did not reach their conversation's last seq", behind, len(subs))
			for i, sub := range subs {
				if sub.seqNow() != last[sub.conversation] && i < 8 {
					t.Logf("subscriber %d (sse %v) of %s at seq %d, last %d", i, sub.sse, sub.conversation, sub.seqNow(), last[sub.conversation])
				}
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopRun()
	readers.Wait()

	// Every subscriber's blocks equal the conversation's.
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, s.serverURL())
	want := map[string]map[string]string{}
	for _, id := range s.conversations {
		res, err := readConversation(ctx, client, id)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = map[string]string{}
		for _, m := range res.Msg.Messages {
			for _, b := range m.Blocks {
				want[id][b.Id] = b.Content
			}
		}
	}
	var events, resumes, snapshots, gaps, repeats, wrong int64
	for i, sub := range subs {
		events += sub.events
		resumes += sub.resumes
		snapshots += sub.snapshots
		gaps += sub.gaps
		repeats += sub.repeats
		got := map[string]string{}
		for id, b := range sub.blocks {
			got[id] = b.String()
		}
		if !mapsEqual(got, want[sub.conversation]) {
			wrong++
			if wrong <= 3 {
				t.Errorf("subscriber %d (sse %v, replay open %v): %d blocks, want %d; first difference: %s", i, sub.sse, sub.replayOpen,
					len(got), len(want[sub.conversation]), firstDifference(got, want[sub.conversation]))
			}
		}
	}
	// A soak whose writers stalled, or whose subscribers were sent only
	// snapshots, tests nothing of the streams: a quiet machine writes
	// over a thousand deltas in 20 s, every one sent to about fifty
	// subscribers.
	if deltas := s.deltas.Load(); deltas < 100 || events < deltas {
		t.Errorf("%d deltas written and %d events received in %v: want at least 100 deltas, each received at least once", deltas, events, duration)
	}
	if gaps != 0 || repeats != 0 || wrong != 0 {
		t.Errorf("%d seqs skipped, %d repeated, %d subscribers with the wrong blocks; want none", gaps, repeats, wrong)
	}
	t.Logf("soak (%s feed): %v, %d subscribers over %d conversations; %d deltas written; %d events received, %d resumes, %d snapshots; hostile requests: %d refused, %d unanswered (server restarting); faults: %s",
		feed, duration, len(subs), conversations, s.deltas.Load(), events, resumes, snapshots, hostile.refused.Load(), hostile.unreachable.Load(), faults)
	for _, p := range s.servers {
		p.stop(t)
	}
}

type soak struct {
	t             *testing.T
	dsn, bin      string
	env           []string
	cluster       *pgembed.Cluster
	pool          *pgxpool.Pool
	conversations []string
	deltas        atomic.Int64
	stop          atomic.Bool // writers stop at their next call

	mu      sync.Mutex
	servers []*serverProcess
}

func (s *soak) serverURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.servers[rand.IntN(len(s.servers))].url
}

// call runs a worker API call, retrying while PostgreSQL restarts. A call
// whose reply was lost but which committed is retried as a no-op: appends
// carry delta_seq, and the state changes answer CV002 the second time.
func (s *soak) call(ctx context.Context, sql string, args ...any) (string, error) {
	for attempt := 0; ; attempt++ {
		var out string
		err := s.pool.QueryRow(ctx, sql, args...).Scan(&out)
		if err == nil {
			return out, nil
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "CV002" && attempt > 0 {
			return "", nil
		}
		if ctx.Err() != nil || attempt > 100 {
			return "", err
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// sendAndClaim sends a message into a random conversation unless the
// writer's last one is still unclaimed (*pending), then claims a prompt,
// as every writer does: any writer may get any prompt. A conversation
// answers one message at a time (the send policy enqueue), so a send into
// one whose reply is in flight waits for its turn, and the claim may find
// nothing: it returns "" then, and the writer tries again later without
// sending more, so the queues stay short.
func (s *soak) sendAndClaim(ctx context.Context, worker string, pending *bool) (string, error) {
	if !*pending {
		conv := s.conversations[rand.IntN(len(s.conversations))]
		if _, err := s.call(ctx, `SELECT (convo.send_message('local', $1::uuid, 'again', '[{}]')).prompt_ids[1]::text`, conv); err != nil {
			return "", err
		}
		*pending = true
	}
	// claim_prompt returns no row when nothing is claimable: "" then
	// (a query with no row would be an error that call retries).
	prompt, err := s.call(ctx, `SELECT coalesce((SELECT prompt_id::text FROM convo.claim_prompt($1, 60)), '')`, worker)
	if err != nil {
		return "", err
	}
	if prompt != "" {
		*pending = false
	}
	return prompt, nil
}

// write streams replies into random conversations until s.stop is set,
// then ends the reply in hand.
func (s *soak) write(ctx context.Context, w int) {
	pending := false
	for n := 0; !s.stop.Load(); n++ {
		prompt, err := s.sendAndClaim(ctx, fmt.Sprintf("soak-writer-%d", w), &pending)
		if err != nil {
			return
		}
		if prompt == "" {
			sleep(ctx, 20*time.Millisecond)
			continue
		}
		if _, err := s.call(ctx, `SELECT convo.start_prompt($1::uuid)::text`, prompt); err != nil {
			return
		}
		block, err := s.call(ctx, `SELECT convo.start_block($1::uuid, 'text')::text`, prompt)
		if err != nil || block == "" {
			return
		}
		for i := range 20 + rand.IntN(40) {
			if s.stop.Load() {
				break // the reply ends below, as every reply does
			}
			if _, err := s.call(ctx, `SELECT convo.append_block($1::uuid, $2, $3)::text`, block, fmt.Sprintf("w%d.%d.%d ", w, n, i), i+1); err != nil {
				return
			}
			s.deltas.Add(1)
		}
		if _, err := s.call(ctx, `SELECT convo.complete_prompt($1::uuid)::text`, prompt); err != nil {
			return
		}
	}
}

// soakReply is a reply a batch writer has in flight.
type soakReply struct {
	prompt, block string
	appends       int
}

// writeBatches streams three replies at a time into random conversations
// through convo.write_batch, one call per round for all of them, until
// s.stop is set, then ends the replies in hand. A call that fails (PostgreSQL restarting) is sent again
// with the same number, which write_batch applies once.
func (s *soak) writeBatches(ctx context.Context, w int) {
	worker := fmt.Sprintf("soak-batcher-%d", w)
	var replies []*soakReply
	pending := false
	batch := int64(1)
	for ; !s.stop.Load(); batch++ {
		var ops []map[string]any
		for len(replies) < 3 {
			prompt, err := s.sendAndClaim(ctx, worker, &pending)
			if err != nil {
				return
			}
			if prompt == "" {
				break // the replies in hand go on; more next round
			}
			r := &soakReply{prompt: prompt, block: uuid.NewString()}
			replies = append(replies, r)
			ops = append(ops, map[string]any{"op": "start_prompt", "prompt": prompt},
				map[string]any{"op": "start_block", "prompt": prompt, "block": r.block, "type": "text"})
		}
		if len(replies) == 0 {
			batch-- // the number goes to the next batch written
			sleep(ctx, 20*time.Millisecond)
			continue
		}
		var done []*soakReply
		for _, r := range replies {
			r.appends++
			ops = append(ops, map[string]any{"op": "append", "prompt": r.prompt, "block": r.block, "seq": r.appends,
				"text": fmt.Sprintf("b%d.%d.%d ", w, batch, r.appends)})
			if r.appends >= 20+rand.IntN(40) {
				ops = append(ops, map[string]any{"op": "complete_prompt", "prompt": r.prompt})
				done = append(done, r)
			}
		}
		encoded, err := json.Marshal(ops)
		if err != nil {
			s.t.Error(err)
			return
		}
		refused, err := s.call(ctx, `SELECT count(*)::text FROM convo.write_batch($1, $2, $3::jsonb)`, worker, batch, encoded)
		if err != nil {
			return
		}
		if refused != "0" {
			s.t.Errorf("write_batch refused %s replies of batch %d of %s", refused, batch, worker)
			return
		}
		s.deltas.Add(int64(len(replies)))
		replies = slices.DeleteFunc(replies, func(r *soakReply) bool { return slices.Contains(done, r) })
		sleep(ctx, 5*time.Millisecond)
	}
	// The replies in hand end, in one batch more.
	var ops []map[string]any
	for _, r := range replies {
		ops = append(ops, map[string]any{"op": "complete_prompt", "prompt": r.prompt})
	}
	if len(ops) == 0 {
		return
	}
	encoded, err := json.Marshal(ops)
	if err != nil {
		s.t.Error(err)
		return
	}
	if _, err := s.call(ctx, `SELECT count(*)::text FROM convo.write_batch($1, $2, $3::jsonb)`, worker, batch, encoded); err != nil {
		s.t.Errorf("end the replies of %s: %v", worker, err)
	}
}

// inject injects a random fault every 1 to 2 s until duration has passed.
func (s *soak) inject(ctx context.Context, duration time.Duration) string {
	end := time.Now().Add(duration)
	counts := map[string]int{}
	for time.Now().Before(end) && ctx.Err() == nil {
		sleep(ctx, time.Second+time.Duration(rand.Int64N(int64(time.Second))))
		switch rand.IntN(5) {
		case 0:
			s.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, pglisten.ApplicationName) //nolint:errcheck // best effort
			counts["listener killed"]++
		case 1:
			if err := s.cluster.Restart(ctx); err != nil {
				s.t.Errorf("restart postgres: %v", err)
			}
			counts["postgres restarted"]++
		case 2:
			s.mu.Lock()
			i := rand.IntN(len(s.servers))
			old := s.servers[i]
			s.mu.Unlock()
			old.stop(s.t)
			fresh := startProcess(s.t, s.bin, s.env...)
			s.mu.Lock()
			s.servers[i] = fresh
			s.mu.Unlock()
			counts["server restarted (SIGTERM)"]++
		case 3:
			s.pool.Exec(ctx, `SELECT convo.compact_events(interval '0 seconds', 1000)`) //nolint:errcheck // best effort
			counts["compaction"]++
		case 4:
			// Every backend of the database (the servers' pools and
			// listeners, the writers'), as an administrator or a pooler
			// restart would: 57P01 to whatever each was running.
			s.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`) //nolint:errcheck // best effort
			counts["backends terminated"]++
		}
	}
	var parts []string
	for k, v := range counts {
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	return strings.Join(parts, ", ")
}

// soakSubscriber follows one conversation, folding what it receives into
// the text of each block.
type soakSubscriber struct {
	s            *soak
	conversation string
	sse          bool

	mu      sync.Mutex
	seq     int64
	started bool
	// replayOpen is true from a snapshot with a reply in progress until the
	// first live event: the replay of its streaming blocks may have been
	// cut short, so a drop then starts again from a snapshot, not after seq
	// (as the TypeScript client's resumeSeq does).
	replayOpen bool

	blocks                                    map[string]*strings.Builder
	events, resumes, snapshots, gaps, repeats int64
}

func (f *soakSubscriber) seqNow() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

// follow streams until ctx ends, resuming after every drop (its own, at
// random, or the server's) on a random server.
func (f *soakSubscriber) follow(ctx context.Context) {
	for ctx.Err() == nil {
		attempt, drop := context.WithCancel(ctx)
		// Drop by itself now and then, to resume.
		timer := time.AfterFunc(time.Duration(500+rand.IntN(4000))*time.Millisecond, drop)
		slow := rand.IntN(10) == 0
		if f.sse {
			f.followSSE(attempt, slow)
		} else {
			f.followConnect(attempt, slow)
		}
		timer.Stop()
		drop()
		f.mu.Lock()
		if f.started {
			f.resumes++
		}
		f.mu.Unlock()
		sleep(ctx, time.Duration(rand.IntN(200))*time.Millisecond)
	}
}

func (f *soakSubscriber) followConnect(ctx context.Context, slow bool) {
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, f.s.serverURL(), connect.WithProtoJSON())
	req := &convov1.StreamConversationRequest{ConversationId: f.conversation}
	f.mu.Lock()
	if f.started && !f.replayOpen {
		req.AfterSeq = &f.seq
	}
	f.mu.Unlock()
	st, err := client.StreamConversation(ctx, connect.NewRequest(req))
	if err != nil {
		return
	}
	defer st.Close()
	for st.Receive() {
		if snap := st.Msg().GetSnapshot(); snap != nil {
			f.snapshot(snap)
		} else if ev := st.Msg().GetEvent(); ev != nil {
			f.apply(ev)
		}
		if slow {
			sleep(ctx, 5*time.Millisecond)
		}
	}
}

func (f *soakSubscriber) followSSE(ctx context.Context, slow bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.s.serverURL()+"/v1/conversations/"+f.conversation+"/events", nil)
	if err != nil {
		return
	}
	f.mu.Lock()
	if f.started && !f.replayOpen {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(f.seq, 10))
	}
	f.mu.Unlock()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		io.Copy(io.Discard, res.Body) //nolint:errcheck
		return
	}
	r := bufio.NewReader(res.Body)
	var name string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data := []byte(strings.TrimPrefix(line, "data: "))
			if name == "snapshot" {
				var snap convov1.Snapshot
				if protojson.Unmarshal(data, &snap) == nil {
					f.snapshot(&snap)
				}
			} else {
				var ev convov1.Event
				if protojson.Unmarshal(data, &ev) == nil {
					f.apply(&ev)
				}
			}
			if slow {
				sleep(ctx, 5*time.Millisecond)
			}
		case line == "":
			name = ""
		}
	}
}

func (f *soakSubscriber) snapshot(snap *convov1.Snapshot) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snapshots++
	f.started = true
	f.seq = snap.Seq
	f.replayOpen = false
	f.blocks = map[string]*strings.Builder{}
	for _, m := range snap.Messages {
		if m.Status == "processing" {
			f.replayOpen = true
		}
		for _, b := range m.Blocks {
			f.blocks[b.Id] = &strings.Builder{}
			f.blocks[b.Id].WriteString(b.Content)
		}
	}
}

func (f *soakSubscriber) apply(ev *convov1.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !ev.Replay {
		f.events++
		switch {
		case ev.Seq <= f.seq:
			f.repeats++
			return
		case ev.Seq != f.seq+1:
			f.gaps++
		}
		f.seq = ev.Seq
		f.replayOpen = false
	}
	switch k := ev.Kind.(type) {
	case *convov1.Event_MessageCreated:
		for _, b := range k.MessageCreated.GetMessage().GetBlocks() {
			f.blocks[b.Id] = &strings.Builder{}
			f.blocks[b.Id].WriteString(b.Content)
		}
	case *convov1.Event_BlockStart:
		if f.blocks[k.BlockStart.BlockId] == nil {
			f.blocks[k.BlockStart.BlockId] = &strings.Builder{}
		}
	case *convov1.Event_BlockDelta:
		b := f.blocks[k.BlockDelta.BlockId]
		if b == nil {
			f.gaps++ // a delta of a block never started: something was lost
			return
		}
		if ev.Replay {
			b.Reset()
		}
		b.WriteString(k.BlockDelta.Content)
	case *convov1.Event_HistoryCleared:
		f.blocks = map[string]*strings.Builder{}
	}
}

// readConversation reads conversation id, again while the server answers
// Unavailable: the last fault may have been a restart of PostgreSQL that
// its pool has not reconnected from yet.
func readConversation(ctx context.Context, client convov1connect.ConversationServiceClient, id string) (*connect.Response[convov1.GetConversationResponse], error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: id}))
		if err == nil || connect.CodeOf(err) != connect.CodeUnavailable || time.Now().After(deadline) {
			return res, err
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func firstDifference(got, want map[string]string) string {
	for k, w := range want {
		if g, ok := got[k]; !ok {
			return fmt.Sprintf("block %s missing", k)
		} else if g != w {
			return fmt.Sprintf("block %s holds %q, want %q", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			return fmt.Sprintf("block %s is not the conversation's", k)
		}
	}
	return "none"
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
