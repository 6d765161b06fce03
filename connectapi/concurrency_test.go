package connectapi_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/worker"
)

// TestManyRepliesAtOnce runs 500 replies at once in one worker pool whose
// writes share transactions over 8 connections, each reply read by a
// subscriber that joined before or while it streams. No reply fails, the
// pool never holds more than its 8 connections, and every subscriber's
// fold equals GetConversation.
func TestManyRepliesAtOnce(t *testing.T) {
	t.Parallel()
	const replies, conns = 500, 8
	ctx := context.Background()
	tb := setup(t)
	if err := tb.store.SetMaxActivePrompts(ctx, 0); err != nil {
		t.Fatal(err)
	}

	// Every conversation has a reply queued, and a subscriber, before
	// the workers start; half of the subscribers join after (mid-reply).
	ids := make([]string, replies)
	for i := range ids {
		ids[i] = tb.send(t, tb.client, "", fmt.Sprintf("question %d", i)).ConversationId
	}
	subs := make([]*subscriber, replies)
	for i := 0; i < replies; i += 2 {
		subs[i] = subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: ids[i]})
	}

	cfg := tb.pool.Config().Copy()
	cfg.MaxConns = conns
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mu sync.Mutex
	outcomes := map[worker.Outcome]int{}
	var failures []error
	deltas := 0
	done := make(chan struct{}, replies)
	models := worker.NewModels("test")
	models.Register("test", chattyModel(40, 20*time.Millisecond), "chatty")
	pool, err := worker.Start(ctx, db, worker.Config{
		Workers: replies, Models: models, PollInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Listener: tb.workerListener(t),
		OnPromptDone: func(r worker.Result) {
			mu.Lock()
			outcomes[r.Outcome]++
			deltas += r.Deltas
			if r.Err != nil {
				failures = append(failures, r.Err)
			}
			mu.Unlock()
			done <- struct{}{}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Stop(context.Background()) //nolint:errcheck

	var peak int32
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak = max(peak, db.Stat().TotalConns())
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	for i := 1; i < replies; i += 2 {
		subs[i] = subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: ids[i]})
	}
	timeout := time.After(2 * time.Minute)
	for range replies {
		select {
		case <-done:
		case <-timeout:
			t.Fatalf("not every reply finished within 2 minutes: %v", outcomes)
		}
	}
	close(stopSampling)
	<-sampled
	mu.Lock()
	if outcomes[worker.OutcomeCompleted] != replies {
		t.Errorf("outcomes %v, want %d completed; first errors: %v", outcomes, replies, failures[:min(len(failures), 3)])
	}
	mu.Unlock()
	t.Logf("%d replies: %d deltas, peak %d connections", replies, deltas, peak)
	if peak > conns {
		t.Errorf("the workers held %d connections, more than their pool's %d", peak, conns)
	}

	for i, s := range subs {
		final := tb.state(t, ids[i])
		st := s.waitSeq(t, final.Seq, streamTimeout)
		if !st.equal(final) {
			t.Errorf("subscriber %d folds to a different state than GetConversation at seq %d: %s", i, final.Seq, st.diff(final))
		}
		if n := len(final.Messages); n != 2 || final.Messages[1].Status != "completed" || len(final.Messages[1].Blocks) != 2 {
			t.Fatalf("conversation %d: %d messages, reply %v", i, n, final.Messages[n-1])
		}
		s.close()
	}
}

// chattyModel reasons briefly, calls no tool, and answers in tokens
// chunks, one every perToken: a reply of two blocks (reasoning, text).
func chattyModel(tokens int, perToken time.Duration) worker.Model {
	return worker.ModelFunc(func(ctx context.Context, req worker.Request) iter.Seq2[worker.Event, error] {
		return func(yield func(worker.Event, error) bool) {
			pause := func() bool {
				select {
				case <-ctx.Done():
					return false
				case <-time.After(perToken):
					return true
				}
			}
			for i := range tokens / 4 {
				if !pause() || !yield(worker.Part{Index: 0, Chunk: worker.ReasoningChunk(fmt.Sprintf("think %d ", i))}, nil) {
					return
				}
			}
			for i := range tokens {
				if !pause() || !yield(worker.Part{Index: 1, Chunk: worker.MessageChunk(fmt.Sprintf("word%d ", i))}, nil) {
					return
				}
			}
			yield(worker.Finish{Reason: worker.FinishStop}, nil)
		}
	})
}
