package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// warmupDeltas are appended, and awaited by every subscriber, before the
// timed deltas: they prove each subscriber is live and the feed connected.
const warmupDeltas = 3

// LatencyResult is one latency scenario: the time from append_block
// returning (the delta committed) to each subscriber receiving it.
type LatencyResult struct {
	Feed string
	// Via is how subscribers listen: "web" or "go" (StreamConversation
	// clients over h2c, in a client process when ClientProcess) or "hub"
	// (Hub.Open + Next in process).
	Via                        string
	ClientProcess              bool
	Conversations              int
	SubscribersPerConversation int
	// Interval is each writer's time between deltas.
	Interval time.Duration
	// Rate is the deltas per second written, all writers together.
	Rate float64
	// Latency is over every (delta, subscriber) pair; Slowest over each
	// delta's last subscriber; Probe (Connect clients only) over one Hub.Open
	// subscription per conversation, i.e. commit to hub fan-out; Append is
	// the append_block round trip.
	Latency, Slowest, Probe, Append Stats
	// Lost counts (delta, subscriber) pairs never received.
	Lost int
	// CPU is how the machine's CPU was spent while the deltas were timed.
	CPU CPUShare
}

func (m *Main) runLatency(ctx context.Context, sys *system) error {
	for _, n := range m.Config.Subscribers {
		if n == 0 {
			continue
		}
		for _, via := range m.Config.Via {
			if err := m.latencyScenario(ctx, sys, via, m.Config.Interval, 1, n); err != nil {
				return fmt.Errorf("%d subscribers via %s: %w", n, via, err)
			}
		}
	}
	if c := m.Config.Conversations; c > 0 && m.Config.SubscribersPerConversation > 0 {
		via := "web"
		if i := slices.IndexFunc(m.Config.Via, isConnect); i >= 0 {
			via = m.Config.Via[i]
		}
		if err := m.latencyScenario(ctx, sys, via, m.Config.ConversationInterval, c, m.Config.SubscribersPerConversation); err != nil {
			return fmt.Errorf("%d conversations: %w", c, err)
		}
	}
	return nil
}

func (m *Main) latencyScenario(ctx context.Context, sys *system, via string, interval time.Duration, conversations, perConversation int) error {
	cfg := m.Config
	replies, err := m.newReplies(ctx, conversations)
	if err != nil {
		return err
	}
	total := warmupDeltas + cfg.Deltas
	n := conversations * perConversation
	convOf := func(i int) int { return i / perConversation }
	ids := make([]string, n)
	for i := range ids {
		ids[i] = replies[convOf(i)].conversationID.String()
	}

	// The subscribers measured, and for Connect clients a hub probe per
	// conversation (commit to hub fan-out, in this process).
	var subs, probe group
	switch {
	case via == "hub":
		subs = newLocalGroup(ctx, n, total, func(ctx context.Context, i int, r *receiver, ready func(error)) {
			hubSubscriber(ctx, sys.hub, replies[convOf(i)].conversationID, r, ready)
		})
	case cfg.ClientProcess:
		if subs, err = m.startClients(ctx, sys.url, via, total, ids); err != nil {
			return err
		}
	default:
		cs := newClientSet(sys.url, via, n, cfg.StreamsPerConn)
		defer cs.close()
		subs = newLocalGroup(ctx, n, total, func(ctx context.Context, i int, r *receiver, ready func(error)) {
			connectSubscriber(ctx, cs.client(i, cfg.StreamsPerConn), ids[i], r, ready)
		})
	}
	groups := []group{subs}
	if isConnect(via) {
		probe = newLocalGroup(ctx, conversations, total, func(ctx context.Context, i int, r *receiver, ready func(error)) {
			hubSubscriber(ctx, sys.hub, replies[i].conversationID, r, ready)
		})
		groups = append(groups, probe)
	}
	defer func() {
		for _, g := range groups {
			g.finish() //nolint:errcheck // a no-op after the finish below
		}
	}()
	awaitAll := func(s stage, limit time.Duration) error {
		for _, g := range groups {
			if err := g.await(ctx, s, limit); err != nil {
				return err
			}
		}
		return nil
	}
	if err := awaitAll(stageOpened, 3*time.Minute); err != nil {
		return err
	}

	q := apiq.New(m.writers)
	for i := range warmupDeltas {
		for _, rp := range replies {
			if err := q.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: rp.blockID, Delta: deltaText(i, cfg.DeltaBytes)}); err != nil {
				return fmt.Errorf("warm-up append: %w", err)
			}
		}
	}
	if err := awaitAll(stageWarm, 30*time.Second); err != nil {
		return err
	}
	if err := m.awaitQuiet(ctx); err != nil {
		return err
	}

	// The timed deltas: each writer appends on its own schedule (phases
	// spread over one interval), open loop, so a slow fan-out shows as
	// latency rather than as fewer deltas.
	commits := make([][]int64, conversations)
	appends := make([]int64, 0, conversations*cfg.Deltas)
	var mu sync.Mutex
	var writers sync.WaitGroup
	writeErr := make(chan error, conversations)
	cpuStart := m.cpuNow()
	start := time.Now()
	for c, rp := range replies {
		commits[c] = make([]int64, cfg.Deltas)
		phase := time.Duration(c) * interval / time.Duration(conversations)
		writers.Go(func() {
			local := make([]int64, 0, cfg.Deltas)
			defer func() { mu.Lock(); appends = append(appends, local...); mu.Unlock() }()
			for i := range cfg.Deltas {
				if d := time.Until(start.Add(phase + time.Duration(i)*interval)); d > 0 {
					select {
					case <-ctx.Done():
						writeErr <- ctx.Err()
						return
					case <-time.After(d):
					}
				}
				t0 := wallNow()
				err := q.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: rp.blockID, Delta: deltaText(warmupDeltas+i, cfg.DeltaBytes)})
				t1 := wallNow()
				if err != nil {
					writeErr <- fmt.Errorf("append: %w", err)
					return
				}
				commits[c][i] = t1
				local = append(local, t1-t0)
			}
		})
	}
	writers.Wait()
	close(writeErr)
	if err := <-writeErr; err != nil {
		return err
	}
	elapsed := time.Since(start)
	// A subscriber that missed deltas is reported (Lost), not fatal.
	if err := awaitAll(stageDone, 30*time.Second); err != nil && !errors.Is(err, errTimeout) {
		return err
	}
	cpu := m.share(cpuStart, m.cpuNow())

	res := LatencyResult{
		Feed: sys.feed, Via: via, ClientProcess: isConnect(via) && cfg.ClientProcess, Interval: interval,
		Conversations: conversations, SubscribersPerConversation: perConversation,
		Rate:   float64(conversations*cfg.Deltas) / elapsed.Seconds(),
		Append: summarize(appends), CPU: cpu,
	}
	recs, err := subs.finish()
	if err != nil {
		return err
	}
	var lat []int64
	slowest := make([][]int64, conversations)
	for c := range slowest {
		slowest[c] = make([]int64, cfg.Deltas)
	}
	for s, rec := range recs {
		c := convOf(s)
		for i := range cfg.Deltas {
			if len(rec) != total || rec[warmupDeltas+i] == 0 {
				res.Lost++
				continue
			}
			d := rec[warmupDeltas+i] - commits[c][i]
			lat = append(lat, d)
			slowest[c][i] = max(slowest[c][i], d)
		}
	}
	res.Latency, res.Slowest = summarize(lat), summarize(slices.Concat(slowest...))
	if probe != nil {
		precs, err := probe.finish()
		if err != nil {
			return err
		}
		var pl []int64
		for c, rec := range precs {
			for i := range cfg.Deltas {
				if at := rec[warmupDeltas+i]; at != 0 {
					pl = append(pl, at-commits[c][i])
				}
			}
		}
		res.Probe = summarize(pl)
	}
	m.Results.Latency = append(m.Results.Latency, res)
	m.Logger.Info("latency", "feed", sys.feed, "via", via, "conversations", conversations,
		"subscribers", perConversation, "p50", res.Latency.P50, "p99", res.Latency.P99, "lost", res.Lost)
	return nil
}
