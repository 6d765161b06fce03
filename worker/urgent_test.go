package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/worker/internal/wdb"

	. "github.com/convo-dev/convo/worker"
)

// laneAPI records the ops of each batch with its lane, and can hold the
// batches of lane 0 that carry appends until released.
type laneAPI struct {
	SQLAPI
	mu      sync.Mutex
	batches []laneBatch
	hold    bool
	held    chan struct{} // closed when a batch is held
	release chan struct{}
}

type laneBatch struct {
	lane int32
	ops  []string // op kinds, in order
}

func (l *laneAPI) BatchWrite(ctx context.Context, arg wdb.BatchWriteParams) ([]wdb.BatchWriteRow, error) {
	var ops []struct{ Op string }
	if err := json.Unmarshal(arg.Ops, &ops); err != nil {
		panic(err)
	}
	kinds := make([]string, len(ops))
	for i, o := range ops {
		kinds[i] = o.Op
	}
	l.mu.Lock()
	l.batches = append(l.batches, laneBatch{lane: arg.Lane, ops: kinds})
	hold := l.hold && arg.Lane == 0 && slices.Contains(kinds, "append")
	if hold {
		l.hold = false
		close(l.held)
	}
	l.mu.Unlock()
	if hold {
		<-l.release
	}
	return l.SQLAPI.BatchWrite(ctx, arg)
}

func (l *laneAPI) snapshot() []laneBatch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.batches)
}

// TestUrgentLaneStartsBesideABatchInFlight: a prompt claimed while its
// lane writes a batch of another reply's text starts at once, on the
// urgent lane, instead of waiting for that batch; both replies end whole,
// in order.
func TestUrgentLaneStartsBesideABatchInFlight(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	api := &laneAPI{held: make(chan struct{}), release: make(chan struct{})}
	wrap := func(inner SQLAPI) SQLAPI { api.SQLAPI = inner; return api }
	tokens := fastTokens(40)
	_, res := tb.start(t, WithWrapAPI(Config{
		Workers: 4, BatchLanes: 1, Models: modelsWith(pacedModel(tokens, 20*time.Millisecond)),
	}, wrap))

	a := tb.send(t, uuid.Nil, "first", `{}`)
	eventually(t, 10*time.Second, "the first reply running", func() bool {
		status, _ := tb.prompt(t, a.promptID)
		return status == "running"
	})
	api.mu.Lock()
	api.hold = true
	api.mu.Unlock()
	<-api.held // lane 0 now has a batch of the first reply's text in flight

	b := tb.send(t, uuid.Nil, "second", `{}`)
	eventually(t, 10*time.Second, "the second reply started while lane 0's batch is held", func() bool {
		status, _ := tb.prompt(t, b.promptID)
		return status == "running"
	})
	close(api.release)

	for _, s := range []sent{a, b} {
		if r := res.wait(t, s.promptID, 30*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("prompt %s: outcome %s: %v", s.promptID, r.Outcome, r.Err)
		}
		m := tb.message(t, s)
		text, _ := blockText(t, tb.events(t, s.conversationID), m.Blocks[0].ID)
		if want := strings.Join(tokens, ""); text != want || m.Blocks[0].Content != want {
			t.Errorf("prompt %s: text %q, content %q, want %q", s.promptID, text, m.Blocks[0].Content, want)
		}
		assertGapFree(t, tb, s.conversationID)
	}
	// The second start went through the urgent lane (number BatchLanes).
	urgent := false
	for _, bt := range api.snapshot() {
		if bt.lane == 1 && slices.Contains(bt.ops, "start_prompt") {
			urgent = true
		}
	}
	if !urgent {
		t.Errorf("no start_prompt was written on the urgent lane (1): %+v", api.snapshot())
	}
}

// TestUrgentBatchesAreSmall: thirty prompts claimed at once start in
// batches of a few starts each (no batch carries more than nine), not in
// one batch that commits the first with the last; every reply ends whole.
func TestUrgentBatchesAreSmall(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	const n = 30
	var prompts []sent
	for range n {
		prompts = append(prompts, tb.send(t, uuid.Nil, "go", `{}`))
	}
	api := &laneAPI{}
	wrap := func(inner SQLAPI) SQLAPI { api.SQLAPI = inner; return api }
	tokens := fastTokens(30)
	_, res := tb.start(t, WithWrapAPI(Config{Workers: n, Models: modelsWith(fastModel(tokens))}, wrap))
	for _, s := range prompts {
		if r := res.wait(t, s.promptID, 60*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("prompt %s: outcome %s: %v", s.promptID, r.Outcome, r.Err)
		}
		text, _ := blockText(t, tb.events(t, s.conversationID), tb.message(t, s).Blocks[0].ID)
		if want := strings.Join(tokens, ""); text != want {
			t.Errorf("prompt %s: text %q, want %q", s.promptID, text, want)
		}
		assertGapFree(t, tb, s.conversationID)
	}
	starts, most := 0, 0
	for _, bt := range api.snapshot() {
		k := 0
		for _, op := range bt.ops {
			if op == "start_prompt" {
				k++
			}
		}
		starts += k
		most = max(most, k)
	}
	if starts != n {
		t.Errorf("%d start_prompt ops written, want %d", starts, n)
	}
	if most > 9 {
		t.Errorf("a batch carried %d starts, want at most 9", most)
	}
}

// assertGapFree checks that a conversation's events have the seqs 1, 2, 3, ….
func assertGapFree(t *testing.T, tb *testBundle, conversationID uuid.UUID) {
	t.Helper()
	for i, e := range tb.events(t, conversationID) {
		if e.Seq != int64(i+1) {
			t.Fatalf("conversation %s: event %d has seq %d", conversationID, i, e.Seq)
		}
	}
}

// cancelAtStart cancels a prompt just before the batch carrying its
// start_prompt is written: the cancel lands between the claim and the
// start.
type cancelAtStart struct {
	SQLAPI
	tb     *testBundle
	prompt uuid.UUID
	once   sync.Once
}

func (c *cancelAtStart) BatchWrite(ctx context.Context, arg wdb.BatchWriteParams) ([]wdb.BatchWriteRow, error) {
	if strings.Contains(string(arg.Ops), `"start_prompt"`) && strings.Contains(string(arg.Ops), c.prompt.String()) {
		c.once.Do(func() {
			if ok, err := c.tb.store.CancelPrompt(ctx, "local", c.prompt); err != nil || !ok {
				panic(fmt.Sprintf("cancel: %v %v", ok, err))
			}
		})
	}
	return c.SQLAPI.BatchWrite(ctx, arg)
}

// TestCancelledBetweenClaimAndStart: the model is called while the start
// is written; when the start is refused (the prompt was cancelled after
// its claim), the model is stopped and nothing of its output is written:
// the prompt stays cancelled, its message has no block.
func TestCancelledBetweenClaimAndStart(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	s := tb.send(t, uuid.Nil, "go", `{}`)
	api := &cancelAtStart{tb: tb, prompt: s.promptID}
	wrap := func(inner SQLAPI) SQLAPI { api.SQLAPI = inner; return api }
	// The model may be called (or not, when the refusal comes first); if
	// it is, it must be stopped.
	var called atomic.Bool
	stopped := make(chan struct{})
	model := ModelFunc(func(ctx context.Context, _ Request) iter.Seq2[Event, error] {
		return func(yield func(Event, error) bool) {
			called.Store(true)
			defer close(stopped)
			for ctx.Err() == nil {
				if !yield(Part{Index: 0, Chunk: MessageChunk("x")}, nil) {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	})
	_, res := tb.start(t, WithWrapAPI(Config{Models: modelsWith(model)}, wrap))
	r := res.wait(t, s.promptID, 30*time.Second)
	if r.Outcome == OutcomeCompleted || r.Outcome == OutcomeFailed {
		t.Fatalf("outcome %s (%v), want the prompt left alone", r.Outcome, r.Err)
	}
	if called.Load() {
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Fatal("the model was not stopped")
		}
	}
	if status, _ := tb.prompt(t, s.promptID); status != "cancelled" {
		t.Errorf("prompt %s, want cancelled", status)
	}
	if m := tb.message(t, s); len(m.Blocks) != 0 {
		t.Errorf("the cancelled reply has %d blocks, want none", len(m.Blocks))
	}
	for _, e := range tb.events(t, s.conversationID) {
		if e.Kind == conversation.EventPromptStarted || e.Kind == conversation.EventBlockStart || e.Kind == conversation.EventBlockDelta {
			t.Errorf("event %s written for a prompt cancelled before its start", e.Kind)
		}
	}
	assertGapFree(t, tb, s.conversationID)
}
