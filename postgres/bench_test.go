package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/convo-dev/convo/postgres/dbq"
)

// BenchmarkAppendBlock measures one convo.append_block call on a block that
// already holds 1, 10,000 or 50,000 deltas. The cost must not grow with the
// block: a delta is one new event row, never a rewrite of the content.
//
//	go test -run '^$' -bench AppendBlock ./postgres/
func BenchmarkAppendBlock(b *testing.B) {
	for _, prefill := range []int{1, 10_000, 50_000} {
		b.Run(fmt.Sprintf("deltas=%d", prefill), func(b *testing.B) {
			ctx := context.Background()
			tb := setup(b)
			r := tb.startReply(b)
			block := tb.startBlock(b, r.promptID, "text")
			// Prefill with 40-byte deltas, like streamed tokens, at most 1,000
			// per transaction: every append updates the conversation's row,
			// and thousands of updates of one row in one transaction slow
			// each other down (workers call each function in its own).
			for done := 0; done < prefill; done += 1000 {
				if _, err := tb.pool.Exec(ctx,
					`SELECT convo.append_block($1, repeat('x', 39) || i::text) FROM generate_series(1, $2) i`,
					block, min(1000, prefill-done)); err != nil {
					b.Fatal(err)
				}
			}
			params := dbq.BlockAppendParams{BlockID: block, Delta: "a token of about forty bytes of text.. "}
			b.ResetTimer()
			for b.Loop() {
				if err := tb.q.BlockAppend(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
