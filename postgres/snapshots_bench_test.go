package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/postgres"
)

// BenchmarkSnapshotBurst measures a burst of joiners: N snapshots asked
// for at once, one per conversation, each conversation a reply in
// progress (a streaming block of 2,000 characters in 20 deltas, read back
// from its events). One iteration is one burst.
//
//   - direct: each joiner reads its own RecentState on the API's pool (16
//     connections, CONVO_DB_MAX_CONNS's default), as before;
//   - grouped: through a SnapshotReader on a pool of its own (2
//     connections, CONVO_SNAPSHOT_CONNS's default).
//
// It reports snapshots a second, each joiner's wait (p50, p99), the
// transactions a burst took (txns/burst), and the wait of a one-row read
// on the API's pool during the burst (probe-p99: what a send waits for a
// connection).
//
//	go test -run '^$' -bench SnapshotBurst -benchtime 5x ./postgres/
func BenchmarkSnapshotBurst(b *testing.B) {
	for _, joiners := range []int{100, 500} {
		dsn := pgtest.DSN(b)
		tb := setupDSN(b, dsn)
		convs := make([]uuid.UUID, joiners)
		for i := range convs {
			r := tb.startReply(b)
			block := tb.startBlock(b, r.promptID, "text")
			if _, err := tb.pool.Exec(context.Background(),
				`SELECT convo.append_block($1, repeat('x', 99) || (i % 10)::text) FROM generate_series(1, 20) i`, block); err != nil {
				b.Fatal(err)
			}
			convs[i] = r.conversationID
		}
		api := poolOf(b, dsn, 16)
		direct := postgres.New(api)
		reader := postgres.NewSnapshotReader(poolOf(b, dsn, postgres.DefaultSnapshotConns))
		for _, mode := range []string{"direct", "grouped"} {
			b.Run(fmt.Sprintf("joiners=%d/%s", joiners, mode), func(b *testing.B) {
				read, txns := direct.RecentState, func() int64 { return 0 }
				if mode == "grouped" {
					read, txns = reader.RecentState, reader.Reads
				}
				burstBench(b, api, convs, read, txns)
			})
		}
	}
}

// poolOf is a pool of conns connections to dsn, closed with the benchmark.
func poolOf(b *testing.B, dsn string, conns int32) *pgxpool.Pool {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// burstBench runs one burst of reads of convs an iteration, with a probe
// on api, and reports the figures BenchmarkSnapshotBurst names. txns
// returns the group reads so far (0: one transaction a read).
func burstBench(b *testing.B, api *pgxpool.Pool, convs []uuid.UUID,
	read func(context.Context, string, uuid.UUID, int) (conversation.State, error), txns func() int64) {
	ctx := context.Background()
	var waits, probes []time.Duration
	var mu sync.Mutex
	before := txns()
	started := time.Now()
	for b.Loop() {
		stop := make(chan struct{})
		var probing sync.WaitGroup
		probing.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				var one int
				if err := api.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				probes = append(probes, time.Since(t0))
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		})
		var wg sync.WaitGroup
		for _, id := range convs {
			wg.Go(func() {
				t0 := time.Now()
				if _, err := read(ctx, "local", id, 256<<10); err != nil {
					b.Error(err)
				}
				mu.Lock()
				waits = append(waits, time.Since(t0))
				mu.Unlock()
			})
		}
		wg.Wait()
		close(stop)
		probing.Wait()
	}
	elapsed := time.Since(started)
	n := txns() - before
	if n == 0 {
		n = int64(len(waits))
	}
	b.ReportMetric(float64(len(waits))/elapsed.Seconds(), "snapshots/s")
	b.ReportMetric(ms(percentile(waits, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(waits, 99)), "p99-ms")
	b.ReportMetric(float64(n)/float64(b.N), "txns/burst")
	b.ReportMetric(ms(percentile(probes, 99)), "probe-p99-ms")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile is the p-th percentile of ds (0 when empty).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
