package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// BenchmarkPromptClaimBurst measures one convo.claim_prompts of 100
// prompts queued by 100 owners who hold nothing (a burst of replies of a
// user each), as the Go pool claims them (PromptClaimMany): each
// iteration queues the 100 afresh, then claims them in one call.
//
//	go test -run '^$' -bench PromptClaimBurst ./postgres/
func BenchmarkPromptClaimBurst(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchClaimBurst(b, n) })
	}
}

func benchClaimBurst(b *testing.B, n int) {
	ctx := context.Background()
	tb := setup(b)
	round := 0
	var took time.Duration
	for b.Loop() {
		b.StopTimer()
		if _, err := tb.pool.Exec(ctx,
			`SELECT convo.send_message('user' || $1::text || '-' || i::text, NULL, 'hello', '[{}]') FROM generate_series(1, $2) i`, fmt.Sprint(round), n); err != nil {
			b.Fatal(err)
		}
		round++
		b.StartTimer()
		began := time.Now()
		claimed, err := tb.api.PromptClaimMany(ctx, apiq.PromptClaimManyParams{Worker: "w", LeaseSeconds: 30, MaxPrompts: int32(n)})
		took += time.Since(began)
		if err != nil || len(claimed) != n {
			b.Fatalf("claimed %d, %v", len(claimed), err)
		}
	}
	b.ReportMetric(float64(took.Microseconds())/1000/float64(b.N*n), "ms/prompt")
}
