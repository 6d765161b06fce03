package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// maxOpsPerWriter bounds a writer's loop besides its deadline.
const maxOpsPerWriter = 10_000_000

// deltaSeqModes are the ways --delta-seq may call append_block.
var deltaSeqModes = []string{"without", "with"}

// ThroughputResult compares deltas per second through the SQL API with the
// same PostgreSQL committing bare event rows, at the same concurrency.
type ThroughputResult struct {
	Feed    string
	Writers int
	// API is convo.append_block calls per second (each its own
	// transaction) without delta_seq, APISeq with it (0: not measured);
	// Bare is transactions of one INSERT + pg_notify per second,
	// BareNoNotify of one INSERT alone.
	API, APISeq, Bare, BareNoNotify float64
	// MinRatio and MaxRatio are the lowest and highest API / Bare of the
	// rounds, MinRatioSeq and MaxRatioSeq those of APISeq / Bare.
	MinRatio, MaxRatio, MinRatioSeq, MaxRatioSeq float64
	// CPU is how the machine's CPU was spent during the runs.
	CPU CPUShare
}

// Ratio is API / Bare.
func (r ThroughputResult) Ratio() float64 { return r.API / r.Bare }

// RatioSeq is APISeq / Bare.
func (r ThroughputResult) RatioSeq() float64 { return r.APISeq / r.Bare }

func (m *Main) runThroughput(ctx context.Context, sys *system) error {
	if err := createBaseline(ctx, m.pool); err != nil {
		return err
	}
	listener, err := listenBaseline(ctx, m.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer listener.close()
	for _, n := range m.Config.Writers {
		if n == 0 {
			continue
		}
		// Each mode's writers append to blocks of their own; with delta_seq
		// writer w numbers its block's appends 1, 2, 3 … across rounds.
		ops := map[string]func(context.Context, int, int, *pgxpool.Conn) error{}
		for _, mode := range m.Config.DeltaSeq {
			replies, err := m.newReplies(ctx, n)
			if err != nil {
				return err
			}
			if mode == "without" {
				ops[mode] = func(ctx context.Context, w, i int, conn *pgxpool.Conn) error {
					return apiq.New(conn).BlockAppend(ctx, apiq.BlockAppendParams{BlockID: replies[w].blockID, Delta: deltaText(i, m.Config.DeltaBytes)})
				}
				continue
			}
			appends := make([]int32, n) // appends[w] is writer w's alone
			ops[mode] = func(ctx context.Context, w, i int, conn *pgxpool.Conn) error {
				appends[w]++
				return apiq.New(conn).BlockAppend(ctx, apiq.BlockAppendParams{
					BlockID: replies[w].blockID, Delta: deltaText(i, m.Config.DeltaBytes), DeltaSeq: &appends[w],
				})
			}
		}
		// bare returns a fresh baseline run: new conversation ids, so each
		// run's seqs start at 0.
		bare := func(notify bool) func(ctx context.Context, w, i int, conn *pgxpool.Conn) error {
			ids := make([]uuid.UUID, n)
			for i := range ids {
				ids[i] = uuid.New()
			}
			return func(ctx context.Context, w, i int, conn *pgxpool.Conn) error {
				return insertBaseline(ctx, conn, ids[w], i, deltaText(i, m.Config.DeltaBytes), notify)
			}
		}
		res := ThroughputResult{Feed: sys.feed, Writers: n}
		if err := m.awaitQuiet(ctx); err != nil {
			return err
		}
		cpuStart := m.cpuNow()
		rounds := m.Config.Rounds
		for round := range rounds {
			// A round runs the API without and with delta_seq (as asked),
			// then the baseline with and without NOTIFY.
			var rates [4]float64
			for i, op := range []func(context.Context, int, int, *pgxpool.Conn) error{ops["without"], ops["with"], bare(true), bare(false)} {
				if op == nil {
					continue
				}
				if rates[i], err = m.sustained(ctx, n, op); err != nil {
					return err
				}
			}
			res.API += rates[0] / float64(rounds)
			res.APISeq += rates[1] / float64(rounds)
			res.Bare += rates[2] / float64(rounds)
			res.BareNoNotify += rates[3] / float64(rounds)
			ratio, ratioSeq := rates[0]/rates[2], rates[1]/rates[2]
			if round == 0 {
				res.MinRatio, res.MaxRatio = ratio, ratio
				res.MinRatioSeq, res.MaxRatioSeq = ratioSeq, ratioSeq
			}
			res.MinRatio, res.MaxRatio = min(res.MinRatio, ratio), max(res.MaxRatio, ratio)
			res.MinRatioSeq, res.MaxRatioSeq = min(res.MinRatioSeq, ratioSeq), max(res.MaxRatioSeq, ratioSeq)
		}
		res.CPU = m.share(cpuStart, m.cpuNow())
		m.Results.Throughput = append(m.Results.Throughput, res)
		m.Logger.Info("throughput", "feed", sys.feed, "writers", n, "api", res.API, "api_seq", res.APISeq,
			"bare", res.Bare, "ratio", res.Ratio(), "ratio_seq", res.RatioSeq())
	}
	return nil
}

// sustained runs op from n writers, each on a connection of its own, for a
// warm-up of a fifth of Duration and then Duration, and returns the
// operations per second of the second part. Writer w's i-th call is op(w, i).
func (m *Main) sustained(ctx context.Context, n int, op func(ctx context.Context, w, i int, conn *pgxpool.Conn) error) (float64, error) {
	warm := m.Config.Duration / 5
	begin := time.Now()
	from, until := begin.Add(warm), begin.Add(warm+m.Config.Duration)
	var counted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range n {
		wg.Go(func() {
			conn, err := m.writers.Acquire(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Release()
			for i := range maxOpsPerWriter {
				if err := op(ctx, w, i, conn); err != nil {
					errs <- err
					return
				}
				t := time.Now()
				if t.After(until) {
					return
				}
				if t.After(from) {
					counted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(counted.Load()) / m.Config.Duration.Seconds(), nil
}

// baselineListener drains the baseline's notifications on a connection of
// its own, as the NotifyFeed drains convo's, so that both pay for a
// listener.
type baselineListener struct {
	stop context.CancelFunc
	done chan struct{}
}

func listenBaseline(ctx context.Context, cfg *pgx.ConnConfig) (*baselineListener, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+baselineChannel); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &baselineListener{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer conn.Close(context.Background())
		for {
			if _, err := conn.WaitForNotification(lctx); err != nil {
				// Cancelled, or the connection failed (the notifications
				// then queue up in PostgreSQL; the measurement goes on).
				return
			}
		}
	}()
	return l, nil
}

func (l *baselineListener) close() {
	l.stop()
	<-l.done
}
