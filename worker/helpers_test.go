package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testbin"
	"github.com/convo-dev/convo/pglisten"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/worker/internal/wdb"

	. "github.com/convo-dev/convo/worker"
	"github.com/convo-dev/convo/worker/demo"
)

func TestMain(m *testing.M) { pgtest.Main(m, testbin.Remove) }

type testBundle struct {
	dsn   string
	db    *pgxpool.Pool
	store *postgres.Store
	// workerDB, when set, is what start runs pools on instead of db: a
	// login of the worker role (useWorkerRole).
	workerDB  *pgxpool.Pool
	workerDSN string
}

// useWorkerRole makes start run pools as a login of the worker role, which
// may only call the SQL worker API (docs/deploy.md, "The worker role").
func (tb *testBundle) useWorkerRole(t testing.TB) {
	t.Helper()
	tb.workerDSN = pgtest.WorkerDSN(t, tb.dsn)
	tb.workerDB = pgtest.ClientPool(t, tb.workerDSN, nil)
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	dsn := pgtest.DSN(t)
	db := pgtest.ClientPool(t, dsn, nil)
	return &testBundle{dsn: dsn, db: db, store: postgres.New(db)}
}

// sent is a queued prompt.
type sent struct {
	conversationID, promptID, messageID uuid.UUID
}

// send sends text as the user "local" with one model configuration.
func (tb *testBundle) send(t testing.TB, conversationID uuid.UUID, text, modelConfig string) sent {
	t.Helper()
	res, err := tb.store.SendMessage(context.Background(), conversation.SendMessageParams{
		OwnerID: "local", ConversationID: conversationID, Text: text,
		ModelConfigs: []json.RawMessage{json.RawMessage(modelConfig)},
	})
	if err != nil {
		t.Fatalf("send message: %v", err)
	}
	return sent{conversationID: res.ConversationID, promptID: res.PromptIDs[0], messageID: res.AssistantMessageIDs[0]}
}

// results collects what the workers of a test did.
type results struct {
	ch   chan Result
	seen map[uuid.UUID]Result // only touched by wait
}

// wait returns the result for promptID, failing the test after timeout.
func (r *results) wait(t testing.TB, promptID uuid.UUID, timeout time.Duration) Result {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if res, ok := r.seen[promptID]; ok {
			return res
		}
		select {
		case res := <-r.ch:
			r.seen[res.PromptID] = res
		case <-deadline:
			t.Fatalf("prompt %s: no result within %s", promptID, timeout)
		}
	}
}

// start starts a Pool on the test's database, stopped when the test ends.
// Zero fields of cfg get test-friendly values: one worker, a quick poll,
// a demo model without pauses.
func (tb *testBundle) start(t testing.TB, cfg Config) (*Pool, *results) {
	t.Helper()
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	if cfg.Models == nil {
		cfg.Models = NewModels("demo")
		cfg.Models.Register("demo", demo.NewModel(demo.Options{TokensPerSecond: -1}), "")
	}
	if cfg.Tools == nil {
		cfg.Tools = demo.Tools()
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	res := &results{ch: make(chan Result, 1000), seen: map[uuid.UUID]Result{}}
	user := cfg.OnPromptDone
	cfg.OnPromptDone = func(r Result) {
		if user != nil {
			user(r)
		}
		res.ch <- r
	}
	db, dsn := tb.db, tb.dsn
	if tb.workerDB != nil {
		db, dsn = tb.workerDB, tb.workerDSN
	}
	if cfg.Workers > 0 && cfg.Listener == nil && pgtest.Pooler(t) {
		// Behind the pooler, the listener connects directly, as
		// cmd/worker's with CONVO_DIRECT_DATABASE_URL.
		cfg.Listener = directListener(t, dsn)
	}
	p, err := Start(context.Background(), db, cfg)
	if err != nil {
		t.Fatalf("start workers: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stop workers: %v", err)
		}
	})
	return p, res
}

// directListener runs a listener on dsn until the test ends.
func directListener(t testing.TB, dsn string) *pglisten.Listener {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	l := pglisten.New(pglisten.Options{ConnConfig: cfg, Logger: testLogger(t), PingInterval: 30 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	// Registered before start's cleanup, so run after it: the listener
	// stops once the workers have.
	t.Cleanup(func() { cancel(); <-done })
	return l
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func (tb *testBundle) events(t testing.TB, conversationID uuid.UUID) []conversation.Event {
	t.Helper()
	events, err := tb.store.EventsAfter(context.Background(), conversationID, 0, 1_000_000)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	return events
}

func (tb *testBundle) state(t testing.TB, conversationID uuid.UUID) conversation.State {
	t.Helper()
	st, err := tb.store.State(context.Background(), "local", conversationID)
	if err != nil {
		t.Fatalf("state: %v", err)
	}
	return st
}

// message returns the message id of the conversation's state.
func (tb *testBundle) message(t testing.TB, s sent) conversation.Message {
	t.Helper()
	for _, m := range tb.state(t, s.conversationID).Messages {
		if m.ID == s.messageID {
			return m
		}
	}
	t.Fatalf("message %s not found", s.messageID)
	return conversation.Message{}
}

// prompt reads a prompt's status and error.
func (tb *testBundle) prompt(t testing.TB, promptID uuid.UUID) (status, errText string) {
	t.Helper()
	var e *string
	if err := tb.db.QueryRow(context.Background(),
		`SELECT status, error FROM convo.prompts WHERE id = $1`, promptID).Scan(&status, &e); err != nil {
		t.Fatalf("read prompt: %v", err)
	}
	if e != nil {
		errText = *e
	}
	return status, errText
}

// eventually polls cond until it holds, failing the test after timeout.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// payload decodes an event's payload.
func payload(t testing.TB, e conversation.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Payload, &m); err != nil {
		t.Fatalf("payload of %s: %v", e.Kind, err)
	}
	return m
}

// blockText concatenates the blockDelta contents of a block from the log.
func blockText(t testing.TB, events []conversation.Event, blockID uuid.UUID) (string, int) {
	t.Helper()
	var b strings.Builder
	n := 0
	for _, e := range events {
		if e.Kind == conversation.EventBlockDelta && e.BlockID.Valid && e.BlockID.UUID == blockID {
			b.WriteString(payload(t, e)["content"].(string))
			n++
		}
	}
	return b.String(), n
}

// scripted is a Model that streams rounds[i] in round i (i is how many
// tool rounds the request already holds). A func in a round is called with
// the request (to check it) and yields nothing.
func scripted(rounds ...[]any) Model {
	return ModelFunc(func(ctx context.Context, req Request) iter.Seq2[Event, error] {
		return func(yield func(Event, error) bool) {
			i := toolRounds(req)
			if i >= len(rounds) {
				yield(nil, fmt.Errorf("the script has no round %d", i))
				return
			}
			for _, step := range rounds[i] {
				switch s := step.(type) {
				case Event:
					if !yield(s, nil) {
						return
					}
				case error:
					yield(nil, s)
					return
				case func(Request):
					s(req)
				case func(context.Context) bool:
					if !s(ctx) {
						return
					}
				default:
					panic(fmt.Sprintf("scripted: %T", step))
				}
			}
		}
	})
}

// toolRounds counts the assistant tool-call messages after the last user
// message.
func toolRounds(req Request) int {
	n := 0
	for _, m := range req.Messages {
		switch {
		case m.Role == RoleUser:
			n = 0
		case m.Role == RoleAssistant && len(m.ToolCalls) > 0:
			n++
		}
	}
	return n
}

// modelsWith registers m as the default provider "test" (and the demo).
func modelsWith(m Model) *Models {
	ms := NewModels("test")
	ms.Register("test", m, "test-model")
	ms.Register("demo", demo.NewModel(demo.Options{TokensPerSecond: -1}), "")
	return ms
}

// countingAPI counts and timestamps the worker's SQL calls, and the ops
// of its batches by kind ("append", "start_prompt", …).
type countingAPI struct {
	SQLAPI
	mu     sync.Mutex
	calls  map[string]int
	writes []time.Time // every call that writes a reply (one transaction each)
	claims [][2]int    // of each claim that took prompts: asked for, took
	// claimDelay, when set, makes each claim take at least this long per
	// prompt it took, as a loaded database would: the pool's claim size
	// (claimCap) then follows it, whatever the machine's speed.
	claimDelay time.Duration
}

func newCountingAPI() (*countingAPI, func(SQLAPI) SQLAPI) {
	c := &countingAPI{calls: map[string]int{}}
	return c, func(inner SQLAPI) SQLAPI { c.SQLAPI = inner; return c }
}

func (c *countingAPI) note(name string, write bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[name]++
	if write {
		c.writes = append(c.writes, time.Now())
	}
}

func (c *countingAPI) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[name]
}

// writeCount is how many calls wrote (each its own transaction).
func (c *countingAPI) writeCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}

func (c *countingAPI) lastWrite() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.writes) == 0 {
		return time.Time{}
	}
	return c.writes[len(c.writes)-1]
}

func (c *countingAPI) PromptClaimMany(ctx context.Context, arg wdb.PromptClaimManyParams) ([]wdb.PromptClaimManyRow, error) {
	c.note("PromptClaimMany", false)
	rows, err := c.SQLAPI.PromptClaimMany(ctx, arg)
	if len(rows) > 0 {
		time.Sleep(c.claimDelay * time.Duration(len(rows)))
		c.mu.Lock()
		c.claims = append(c.claims, [2]int{int(arg.MaxPrompts), len(rows)})
		c.mu.Unlock()
	}
	return rows, err
}

// claimSizes is, for each claim that took prompts, how many it asked for
// and took.
func (c *countingAPI) claimSizes() [][2]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.claims)
}

func (c *countingAPI) BatchWrite(ctx context.Context, arg wdb.BatchWriteParams) ([]wdb.BatchWriteRow, error) {
	var ops []struct{ Op string }
	if err := json.Unmarshal(arg.Ops, &ops); err != nil {
		panic(err)
	}
	rows, err := c.SQLAPI.BatchWrite(ctx, arg)
	c.note("BatchWrite", true)
	for _, o := range ops {
		c.note(o.Op, false)
	}
	return rows, err
}

func (c *countingAPI) PromptHeartbeat(ctx context.Context, arg wdb.PromptHeartbeatParams) (bool, error) {
	c.note("PromptHeartbeat", false)
	return c.SQLAPI.PromptHeartbeat(ctx, arg)
}

func (c *countingAPI) WorkerHeartbeat(ctx context.Context, arg wdb.WorkerHeartbeatParams) (bool, error) {
	c.note("WorkerHeartbeat", false)
	return c.SQLAPI.WorkerHeartbeat(ctx, arg)
}

func (c *countingAPI) PromptFail(ctx context.Context, arg wdb.PromptFailParams) error {
	err := c.SQLAPI.PromptFail(ctx, arg)
	c.note("PromptFail", true)
	return err
}

func (c *countingAPI) WorkerPromptRead(ctx context.Context, arg wdb.WorkerPromptReadParams) ([]wdb.WorkerPromptReadRow, error) {
	c.note("WorkerPromptRead", false)
	return c.SQLAPI.WorkerPromptRead(ctx, arg)
}
