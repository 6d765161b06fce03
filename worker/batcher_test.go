package worker_test

import (
	"bytes"
	"context"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/worker/internal/wdb"

	. "github.com/convo-dev/convo/worker"
)

// fastTokens are n chunks of mixed scripts, as a fast model streams them.
func fastTokens(n int) []string {
	words := []string{"Post", "gre", "SQL", " ", "é", "😀", "日本", "\n", "**bold**", " — ", "\t", "ok"}
	out := make([]string, n)
	for i := range out {
		out[i] = words[i%len(words)]
	}
	return out
}

// fastModel streams tokens as one message item as fast as it can.
func fastModel(tokens []string) Model { return pacedModel(tokens, 0) }

// pacedModel streams tokens as one message item, one every perToken.
func pacedModel(tokens []string, perToken time.Duration) Model {
	return ModelFunc(func(ctx context.Context, _ Request) iter.Seq2[Event, error] {
		return func(yield func(Event, error) bool) {
			start := time.Now()
			for i, tok := range tokens {
				if wait := time.Until(start.Add(time.Duration(i) * perToken)); wait > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(wait):
					}
				}
				if !yield(Part{Index: 0, Chunk: MessageChunk(tok)}, nil) {
					return
				}
			}
			yield(Finish{Reason: FinishStop}, nil)
		}
	})
}

// TestBatching checks that coalescing deltas keeps the text byte for byte
// and cuts the commits.
func TestBatching(t *testing.T) {
	t.Parallel()
	tokens := fastTokens(3000)
	want := strings.Join(tokens, "")

	// reply streams tokens with batchInterval; it returns the block's
	// text as its deltas tell it, the number of deltas, and the number of
	// batches (each its own transaction, so one commit).
	reply := func(t *testing.T, batchInterval time.Duration) (string, int, int) {
		tb := setup(t)
		api, wrap := newCountingAPI()
		_, res := tb.start(t, WithWrapAPI(Config{Models: modelsWith(fastModel(tokens)), BatchInterval: batchInterval}, wrap))
		s := tb.send(t, uuid.Nil, "go", `{}`)
		r := res.wait(t, s.promptID, 30*time.Second)
		if r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		m := tb.message(t, s)
		text, deltas := blockText(t, tb.events(t, s.conversationID), m.Blocks[0].ID)
		if m.Blocks[0].Content != text {
			t.Errorf("content differs from the deltas")
		}
		if deltas != r.Deltas || deltas != api.count("append") {
			t.Errorf("deltas: %d in the log, %d reported, %d calls", deltas, r.Deltas, api.count("append"))
		}
		return text, deltas, api.writeCount()
	}

	t.Run("TextIsIdenticalAndCommitsFewer", func(t *testing.T) {
		t.Parallel()
		var wg sync.WaitGroup
		var batched, unbatched struct {
			text            string
			deltas, commits int
		}
		wg.Go(func() { batched.text, batched.deltas, batched.commits = reply(t, 20*time.Millisecond) })
		wg.Go(func() { unbatched.text, unbatched.deltas, unbatched.commits = reply(t, -1) })
		wg.Wait()
		if batched.text != want || unbatched.text != want {
			t.Fatalf("text differs from the model's (batched %v, unbatched %v)", batched.text == want, unbatched.text == want)
		}
		if unbatched.deltas != len(tokens) {
			t.Errorf("without batching: %d deltas for %d tokens", unbatched.deltas, len(tokens))
		}
		if batched.deltas*10 > unbatched.deltas {
			t.Errorf("batching cut deltas only from %d to %d", unbatched.deltas, batched.deltas)
		}
		t.Logf("%d tokens: %d appends (%d commits) batched, %d appends (%d commits) unbatched",
			len(tokens), batched.deltas, batched.commits, unbatched.deltas, unbatched.commits)
	})

	t.Run("PauseAfterABurstIsFlushedByTheTimer", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		release := make(chan struct{})
		burst := strings.Repeat("burst ", 10)
		var steps []any
		for range 10 {
			steps = append(steps, Part{Index: 0, Chunk: MessageChunk("burst ")})
		}
		steps = append(steps,
			func(ctx context.Context) bool {
				select {
				case <-release:
					return true
				case <-ctx.Done():
					return false
				}
			},
			Part{Index: 0, Chunk: MessageChunk("end")}, Finish{Reason: FinishStop})
		// The first batch with an append takes longer than the interval,
		// as it may when PostgreSQL is busy: the interval counts from the
		// end of that write, so the burst after it is still one write.
		slow := func(inner SQLAPI) SQLAPI { return &slowFirstAppend{SQLAPI: inner, delay: 150 * time.Millisecond} }
		_, res := tb.start(t, WithWrapAPI(Config{Models: modelsWith(scripted(steps)), BatchInterval: 100 * time.Millisecond}, slow))
		s := tb.send(t, uuid.Nil, "go", `{}`)
		// The model is waiting: the burst must still reach the log.
		eventually(t, 5*time.Second, "the burst to be written", func() bool {
			for _, e := range tb.events(t, s.conversationID) {
				if e.Kind == conversation.EventBlockStart {
					text, _ := blockText(t, tb.events(t, s.conversationID), e.BlockID.UUID)
					return text == burst
				}
			}
			return false
		})
		close(release)
		if r := res.wait(t, s.promptID, 5*time.Second); r.Outcome != OutcomeCompleted || r.Deltas > 3 {
			t.Errorf("outcome %s, %d deltas (want the first token, the rest of the burst, the end)", r.Outcome, r.Deltas)
		}
	})
}

// slowFirstAppend makes the first batch holding an append take delay
// longer.
type slowFirstAppend struct {
	SQLAPI
	delay time.Duration
	once  sync.Once
}

func (s *slowFirstAppend) BatchWrite(ctx context.Context, arg wdb.BatchWriteParams) ([]wdb.BatchWriteRow, error) {
	if bytes.Contains(arg.Ops, []byte(`"op":"append"`)) {
		s.once.Do(func() { time.Sleep(s.delay) })
	}
	return s.SQLAPI.BatchWrite(ctx, arg)
}

// BenchmarkReplyCommits streams one reply of 2,000 tokens, from a model
// as fast as it can be and from one at 2,000 tokens a second, with and
// without batching, and reports the appends and the commits (batches) per
// reply (claims are left out).
//
//	go test -run '^$' -bench ReplyCommits -benchtime 5x ./worker/
func BenchmarkReplyCommits(b *testing.B) {
	tokens := fastTokens(2000)
	for _, pace := range []struct {
		name     string
		perToken time.Duration
	}{{"instant", 0}, {"2000tps", 500 * time.Microsecond}} {
		for _, batch := range []struct {
			name     string
			interval time.Duration
		}{{"batched-20ms", 20 * time.Millisecond}, {"unbatched", -1}} {
			b.Run(pace.name+"/"+batch.name, func(b *testing.B) {
				tb := setup(b)
				api, wrap := newCountingAPI()
				_, res := tb.start(b, WithWrapAPI(Config{Models: modelsWith(pacedModel(tokens, pace.perToken)), BatchInterval: batch.interval}, wrap))
				appends, commits := 0, 0
				for b.Loop() {
					before, beforeAppends := api.writeCount(), api.count("append")
					s := tb.send(b, uuid.Nil, "go", `{}`)
					if r := res.wait(b, s.promptID, time.Minute); r.Outcome != OutcomeCompleted {
						b.Fatalf("outcome %s: %v", r.Outcome, r.Err)
					}
					appends += api.count("append") - beforeAppends
					commits += api.writeCount() - before
				}
				b.ReportMetric(float64(appends)/float64(b.N), "appends/reply")
				b.ReportMetric(float64(commits)/float64(b.N), "commits/reply")
			})
		}
	}
}
