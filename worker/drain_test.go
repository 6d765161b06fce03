package worker_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	. "github.com/convo-dev/convo/worker"
	"github.com/convo-dev/convo/worker/demo"
	"github.com/convo-dev/convo/worker/internal/wdb"
)

// TestDrainFinishesReplies drains a pool in the middle of a reply: the
// reply completes, and a prompt queued meanwhile is left for other
// workers.
func TestDrainFinishesReplies(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	models := NewModels("demo")
	models.Register("demo", demo.NewModel(demo.Options{TokensPerSecond: 200}), "")
	p, res := tb.start(t, Config{Models: models, Name: "draining"})
	s := tb.send(t, uuid.Nil, "Hello", `{}`)
	eventually(t, 20*time.Second, "the prompt to start", func() bool {
		st, _ := tb.prompt(t, s.promptID)
		return st == "running"
	})
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		drained <- p.Drain(ctx, 5*time.Second)
	}()
	// The one worker is busy with the reply until it ends, and then
	// finds claims stopped.
	later := tb.send(t, uuid.Nil, "Are you there?", `{}`)

	if err := <-drained; err != nil {
		t.Fatalf("drain: %v", err)
	}
	if r := res.wait(t, s.promptID, time.Second); r.Outcome != OutcomeCompleted {
		t.Errorf("the reply in flight: outcome %s (%v), want completed", r.Outcome, r.Err)
	}
	if st, _ := tb.prompt(t, later.promptID); st != "queued" {
		t.Errorf("the prompt sent while draining is %s, want queued for another worker", st)
	}
}

// blockingStart holds the batch that starts a prompt until released, then
// fails it, so a test can stop a pool between a claim and the start.
type blockingStart struct {
	SQLAPI
	entered chan struct{}
	release chan struct{}
}

func (b *blockingStart) BatchWrite(ctx context.Context, arg wdb.BatchWriteParams) ([]wdb.BatchWriteRow, error) {
	if !bytes.Contains(arg.Ops, []byte(`"op":"start_prompt"`)) {
		return b.SQLAPI.BatchWrite(ctx, arg)
	}
	close(b.entered)
	<-b.release
	return nil, &pgconn.PgError{Code: "CV003", Message: "start abandoned by the test"}
}

// TestStopReleasesUnstartedPrompt stops a pool that has claimed a prompt
// but not started it: the prompt goes back to the queue at once, and
// another worker takes it long before its 30 s lease would expire.
func TestStopReleasesUnstartedPrompt(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	block := &blockingStart{entered: make(chan struct{}), release: make(chan struct{})}
	p, _ := tb.start(t, WithWrapAPI(Config{Name: "leaving", LeaseSeconds: 30}, func(inner SQLAPI) SQLAPI {
		block.SQLAPI = inner
		return block
	}))
	s := tb.send(t, uuid.Nil, "Hello", `{}`)
	select {
	case <-block.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the prompt was not claimed")
	}
	p.Cancel(ErrShutdown)
	close(block.release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	var holder string
	if err := tb.db.QueryRow(ctx, `SELECT concat_ws(' until ', worker, lease_expires_at) FROM convo.prompts WHERE id = $1`, s.promptID).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if holder != "" {
		t.Errorf("after Stop the prompt is still held by %s; want it released", holder)
	}
	_, res := tb.start(t, Config{Name: "taking-over"})
	if r := res.wait(t, s.promptID, 10*time.Second); r.Outcome != OutcomeCompleted || r.Worker != "taking-over" {
		t.Errorf("the released prompt: %s by %s (%v); want completed by taking-over", r.Outcome, r.Worker, r.Err)
	}
}
