package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/worker/internal/wdb"
)

// recordingAPI records the batches a committer writes, without a
// database, and refuses what refuse says.
type recordingAPI struct {
	sqlAPI
	mu      sync.Mutex
	batches [][]wireOp
	numbers []int64
	refuse  func(ops []wireOp) []wdb.BatchWriteRow
	// fail, when set, fails a whole batch as PostgreSQL would.
	fail func(ops []wireOp) error
}

func (a *recordingAPI) BatchWrite(_ context.Context, arg wdb.BatchWriteParams) ([]wdb.BatchWriteRow, error) {
	var ops []wireOp
	if err := json.Unmarshal(arg.Ops, &ops); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		if err := a.fail(ops); err != nil {
			return nil, err
		}
	}
	a.batches = append(a.batches, ops)
	a.numbers = append(a.numbers, arg.Batch)
	if a.refuse != nil {
		return a.refuse(ops), nil
	}
	return nil, nil
}

// BatchMark answers as for a worker that never wrote a batch.
func (a *recordingAPI) BatchMark(context.Context, wdb.BatchMarkParams) (int64, error) {
	return 0, pgx.ErrNoRows
}

// summary is each batch as "op:text" strings.
func (a *recordingAPI) summary() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out [][]string
	for _, b := range a.batches {
		var ops []string
		for _, o := range b {
			s := o.Op
			if o.Text != nil {
				s += fmt.Sprintf(":%s#%d", *o.Text, o.Seq)
			}
			ops = append(ops, s)
		}
		out = append(out, ops)
	}
	return fmt.Sprint(out)
}

// TestWriter drives writers and a committer by hand (flush writes one
// batch), so each batch's content is known.
func TestWriter(t *testing.T) {
	t.Parallel()
	type bundle struct {
		api    *recordingAPI
		c      *committer
		w      *writer
		cancel context.CancelCauseFunc
		failed chan error
	}
	setup := func(t *testing.T, interval time.Duration) *bundle {
		api := &recordingAPI{}
		cfg := &Config{Name: "w", CallTimeout: time.Second, BatchInterval: interval, BatchBytes: 1 << 20,
			LeaseSeconds: 30, HeartbeatInterval: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)}
		m := newPoolMetrics()
		c := newCommitter(api, "w", 0, false, cfg, &m)
		ctx, cancel := context.WithCancelCause(context.Background())
		failed := make(chan error, 1)
		w, err := newWriter(ctx, func(err error) {
			select {
			case failed <- err:
			default:
			}
			cancel(err)
		}, c, nil, uuid.New())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(nil); w.close() })
		return &bundle{api: api, c: c, w: w, cancel: cancel, failed: failed}
	}
	ctx := context.Background()

	t.Run("CoalescesTextPerTargetInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, time.Hour)
		a, _ := b.w.startBlock("text", nil)
		for _, s := range []string{"he", "ll", "o"} {
			if err := b.w.appendText(target{id: a}, s); err != nil {
				t.Fatal(err)
			}
		}
		b.c.flush(ctx)
		// Text to two blocks, interleaved, keeps its order: three appends.
		bb, _ := b.w.startBlock("reasoning", nil)
		_ = b.w.appendText(target{id: a}, "x")
		_ = b.w.appendText(target{id: bb}, "y")
		_ = b.w.appendText(target{id: a}, "z")
		_ = b.w.endBlock(a, nil)
		b.c.flush(ctx)
		want := "[[start_block append:hello#1] [start_block append:x#2 append:y#1 append:z#3 end_block]]"
		if got := b.api.summary(); got != want {
			t.Errorf("batches\n got %s\nwant %s", got, want)
		}
		if err := b.w.sync(); err != nil || b.w.deltaCount() != 4 {
			t.Errorf("sync: %v; %d deltas, want 4", err, b.w.deltaCount())
		}
	})

	t.Run("WithoutCoalescingEveryChunkIsAnAppend", func(t *testing.T) {
		t.Parallel()
		b := setup(t, -1)
		a, _ := b.w.startBlock("text", nil)
		_ = b.w.appendText(target{id: a}, "a")
		_ = b.w.appendText(target{id: a}, "b")
		b.c.flush(ctx)
		if got, want := b.api.summary(), "[[start_block append:a#1 append:b#2]]"; got != want {
			t.Errorf("batches %s, want %s", got, want)
		}
	})

	t.Run("RefusalFailsTheReplyFromThatOp", func(t *testing.T) {
		t.Parallel()
		b := setup(t, time.Hour)
		b.api.refuse = func(ops []wireOp) []wdb.BatchWriteRow {
			return []wdb.BatchWriteRow{{PromptID: ops[0].Prompt, OpIndex: 2, Code: sqlstate.IllegalState,
				Message: "write_batch: prompt is cancelled, not running"}}
		}
		a, _ := b.w.startBlock("text", nil)
		_ = b.w.appendText(target{id: a}, "kept")
		_ = b.w.endBlock(a, nil)
		b.c.flush(ctx)
		err := b.w.sync()
		if sqlstate.Of(err) != sqlstate.IllegalState {
			t.Fatalf("sync: %v, want the refusal", err)
		}
		select {
		case ferr := <-b.failed:
			if !errors.Is(ferr, err) {
				t.Errorf("failed with %v, want %v", ferr, err)
			}
		default:
			t.Error("the prompt was not stopped")
		}
		if b.w.deltaCount() != 1 {
			t.Errorf("%d deltas counted, want the one applied before the refusal", b.w.deltaCount())
		}
		if err := b.w.appendText(target{id: a}, "more"); err == nil {
			t.Error("a write after the refusal was accepted")
		}
	})

	t.Run("BatchRefusedWholeIsWrittenReplyByReply", func(t *testing.T) {
		t.Parallel()
		b := setup(t, time.Hour)
		other, err := newWriter(context.Background(), func(error) {}, b.c, nil, uuid.New())
		if err != nil {
			t.Fatal(err)
		}
		defer other.close()
		// PostgreSQL refuses any batch holding the poison, whichever
		// reply it belongs to.
		b.api.fail = func(ops []wireOp) error {
			for _, o := range ops {
				if o.Text != nil && *o.Text == "poison" {
					return &pgconn.PgError{Code: "22P05", Message: "unsupported Unicode escape sequence"}
				}
			}
			return nil
		}
		a, _ := b.w.startBlock("text", nil)
		_ = b.w.appendText(target{id: a}, "poison")
		o, _ := other.startBlock("text", nil)
		_ = other.appendText(target{id: o}, "fine")
		b.c.flush(ctx)
		if err := other.sync(); err != nil {
			t.Errorf("the other reply failed with the poisoned one: %v", err)
		}
		if err := b.w.sync(); sqlstate.Of(err) != "22P05" {
			t.Errorf("the poisoned reply: %v, want its batch's error", err)
		}
		if got := b.api.summary(); got != "[[start_block append:fine#1]]" {
			t.Errorf("batches written %s", got)
		}
	})

	t.Run("NoWritesAfterStop", func(t *testing.T) {
		t.Parallel()
		b := setup(t, time.Hour)
		a, _ := b.w.startBlock("text", nil)
		_ = b.w.appendText(target{id: a}, "a")
		b.cancel(errCancelled)
		b.c.flush(ctx)
		if err := b.w.endBlock(a, nil); err != errCancelled {
			t.Errorf("end after stop: %v", err)
		}
		if err := b.w.sync(); err != errCancelled {
			t.Errorf("sync after stop: %v", err)
		}
		if got := b.api.summary(); got != "[]" {
			t.Errorf("batches after stop: %s", got)
		}
	})

	t.Run("NoHeartbeatInBatchesAndBatchNumbersGrow", func(t *testing.T) {
		t.Parallel()
		b := setup(t, time.Hour)
		// A reply idle far longer than the heartbeat interval writes
		// nothing: the pool's process lease keeps it, not its batches.
		b.c.flush(ctx)
		if _, err := b.w.startBlock("text", nil); err != nil {
			t.Fatal(err)
		}
		b.c.flush(ctx)
		if err := b.w.enqueue(&op{kind: opCompletePrompt}, true); err != nil {
			t.Fatal(err)
		}
		b.c.flush(ctx)
		if got, want := b.api.summary(), "[[start_block] [complete_prompt]]"; got != want {
			t.Errorf("batches %s, want %s", got, want)
		}
		if n := b.api.numbers; len(n) != 2 || n[1] != n[0]+1 {
			t.Errorf("batch numbers %v", n)
		}
	})
}

func TestWithoutNUL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"text":"a\u0000b"}`:            `{"text":"a\ufffdb"}`,
		`{"text":"a\\u0000b"}`:           `{"text":"a\\u0000b"}`, // a backslash, then "u0000"
		`{"text":"\\\u0000"}`:            `{"text":"\\\ufffd"}`,
		`{"text":"plain \u00e9"}`:        `{"text":"plain \u00e9"}`,
		`{"input":{"k":"\u0000\u0000"}}`: `{"input":{"k":"\ufffd\ufffd"}}`,
	} {
		if got := string(withoutNUL([]byte(in))); got != want {
			t.Errorf("withoutNUL(%s) = %s, want %s", in, got, want)
		}
	}
	// Encoded as the committer encodes ops, a NUL becomes U+FFFD.
	enc, err := json.Marshal(wireOp{Op: opAppend, Text: new("a\x00b")})
	if err != nil {
		t.Fatal(err)
	}
	var back wireOp
	if err := json.Unmarshal(withoutNUL(enc), &back); err != nil || *back.Text != "a\uFFFDb" {
		t.Errorf("round trip: %q, %v", *back.Text, err)
	}
}
