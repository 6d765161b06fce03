package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// BenchmarkAppendBlock measures one convo.append_block call on a block that
// already holds 1, 10,000 or 50,000 deltas, without and with delta_seq.
// The cost must not grow with the block: a delta is one new event row,
// never a rewrite of the content. "interleaved" appends to two blocks of
// one conversation in turn (as the two prompts of an A/B comparison do),
// so that every call takes append_block's full path.
//
//	go test -run '^$' -bench AppendBlock ./postgres/
func BenchmarkAppendBlock(b *testing.B) {
	ctx := context.Background()
	for _, prefill := range []int{1, 10_000, 50_000} {
		for _, withSeq := range []bool{false, true} {
			name := fmt.Sprintf("deltas=%d", prefill)
			if withSeq {
				name += ",delta_seq"
			}
			b.Run(name, func(b *testing.B) {
				tb := setup(b)
				r := tb.startReply(b)
				block := tb.startBlock(b, r.promptID, "text")
				// Prefill with 40-byte deltas, like streamed tokens, at most
				// 1,000 per transaction: every append updates the
				// conversation's row, and thousands of updates of one row in
				// one transaction slow each other down (workers call each
				// function in its own).
				for done := 0; done < prefill; done += 1000 {
					if _, err := tb.pool.Exec(ctx,
						`SELECT convo.append_block($1, repeat('x', 39) || i::text, CASE WHEN $3 THEN $2 + i END)
						   FROM generate_series(1, $4::int) i`,
						block, done, withSeq, min(1000, prefill-done)); err != nil {
						b.Fatal(err)
					}
				}
				params := apiq.BlockAppendParams{BlockID: block, Delta: "a token of about forty bytes of text.. "}
				seq := int32(prefill)
				b.ResetTimer()
				for b.Loop() {
					if withSeq {
						seq++
						params.DeltaSeq = &seq
					}
					if err := tb.api.BlockAppend(ctx, params); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	b.Run("interleaved", func(b *testing.B) {
		tb := setup(b)
		r := tb.startReply(b)
		blocks := []uuid.UUID{tb.startBlock(b, r.promptID, "text"), tb.startBlock(b, r.promptID, "text")}
		seqs := make([]int32, len(blocks))
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			w := i % len(blocks)
			seqs[w]++
			if err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{
				BlockID: blocks[w], Delta: "a token of about forty bytes of text.. ", DeltaSeq: &seqs[w],
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPromptClaim measures one convo.claim_prompt (the fair order:
// fewest prompts held, then least recently served) with 10, 1,000 or
// 10,000 queued prompts, 10 per owner; "held=0": nobody holds a prompt
// (the claim walks the owners who hold nothing and takes the first);
// "held=all": every owner holds one claimed prompt (the claim counts what
// each holds, 1,000 owners at 10,000). Each iteration claims a prompt and
// hands it back (convo.release_prompt), so the queue keeps its size.
//
//	go test -run '^$' -bench PromptClaim ./postgres/
func BenchmarkPromptClaim(b *testing.B) {
	ctx := context.Background()
	for _, queued := range []int{10, 1_000, 10_000} {
		for _, held := range []string{"0", "all"} {
			b.Run(fmt.Sprintf("queued=%d/held=%s", queued, held), func(b *testing.B) {
				tb := setup(b)
				if _, err := tb.pool.Exec(ctx,
					`SELECT convo.send_message('user' || (i / 10)::text, NULL, 'hello', '[{}]') FROM generate_series(0, $1 - 1) i`, queued); err != nil {
					b.Fatal(err)
				}
				if held == "all" {
					if _, err := tb.api.PromptClaimMany(ctx, apiq.PromptClaimManyParams{Worker: "w0", LeaseSeconds: 3600, MaxPrompts: int32(max(queued/10, 1))}); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := tb.pool.Exec(ctx, `ANALYZE convo.prompts; ANALYZE convo.owner_queue`); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for b.Loop() {
					claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
					if err != nil || len(claimed) != 1 {
						b.Fatalf("claim = %+v, %v", claimed, err)
					}
					if ok, err := tb.api.PromptRelease(ctx, apiq.PromptReleaseParams{PromptID: claimed[0].PromptID, Worker: "w1"}); err != nil || !ok {
						b.Fatalf("release = %v, %v", ok, err)
					}
				}
			})
		}
	}
}
