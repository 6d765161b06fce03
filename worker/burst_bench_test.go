package worker_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/internal/firstdelta"

	. "github.com/convo-dev/convo/worker"
)

// BenchmarkBurstFirstText sends 100 messages at once (8 senders, each
// prompt in a conversation of its own) to a running pool of 100 workers
// whose model's first token is due 25 ms after it is called, and reports
// the time from each prompt's claim to its first delta's insert (its
// event's created_at): the worker's part of a reply's first delta, p50
// and p99 over the 100.
//
//	go test -run '^$' -bench BurstFirstText -benchtime 5x ./worker/
func BenchmarkBurstFirstText(b *testing.B) {
	const n = 100
	tb := setup(b)
	tokens := fastTokens(6)
	_, res := tb.start(b, Config{Workers: n, Models: modelsWith(pacedModel(tokens, 25*time.Millisecond))})
	firstdelta.Enable()
	defer firstdelta.Default.Disable()
	var took []time.Duration
	for b.Loop() {
		firstdelta.Enable() // afresh: this round's claims only
		prompts := make([]sent, n)
		var wg sync.WaitGroup
		next := make(chan int)
		for range 8 {
			wg.Go(func() {
				for i := range next {
					prompts[i] = tb.send(b, uuid.Nil, "go", `{}`)
				}
			})
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		for _, s := range prompts {
			if r := res.wait(b, s.promptID, time.Minute); r.Outcome != OutcomeCompleted {
				b.Fatalf("outcome %s: %v", r.Outcome, r.Err)
			}
		}
		records, _ := firstdelta.Default.Records()
		claimed := map[uuid.UUID]int64{}
		for _, r := range records {
			if t, ok := r.Stages[firstdelta.Claimed.String()]; ok {
				claimed[r.PromptID] = t
			}
		}
		for _, s := range prompts {
			var first time.Time
			if err := tb.db.QueryRow(context.Background(), `SELECT min(created_at) FROM convo.events
				WHERE conversation_id = $1 AND kind = 'blockDelta'`, s.conversationID).Scan(&first); err != nil {
				b.Fatal(err)
			}
			c, ok := claimed[s.promptID]
			if !ok {
				b.Fatalf("prompt %s: no claim recorded", s.promptID)
			}
			took = append(took, time.Duration(first.UnixNano()-c))
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "claim-to-first-text-p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "claim-to-first-text-p99-ms")
}
