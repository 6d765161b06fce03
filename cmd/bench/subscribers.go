package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

// openConcurrency bounds the subscriptions being opened at once (each
// reads a snapshot).
const openConcurrency = 32

// stage is how far every subscriber of a group has come.
type stage int

const (
	stageOpened stage = iota // registered with the hub
	stageWarm                // received the last warm-up delta
	stageDone                // received the last delta
)

func (s stage) String() string { return [...]string{"opened", "warm", "done"}[s] }

// group is a set of subscribers, each recording when each delta arrived.
type group interface {
	// await waits until every subscriber has reached s, at most limit.
	await(ctx context.Context, s stage, limit time.Duration) error
	// finish ends the subscribers and returns each one's arrival times
	// (Unix nanoseconds by delta index; 0: never), in the order they were
	// given.
	finish() ([][]int64, error)
}

// wallNow is the clock of arrivals and commits: the wall clock, which the
// client process shares.
func wallNow() int64 { return time.Now().UnixNano() }

// receiver is one subscriber's record: rec[i] is when delta i arrived.
type receiver struct {
	rec  []int64
	warm chan struct{} // closed when the last warm-up delta arrived
	done chan struct{} // closed when the last delta arrived
}

func newReceiver(total int) *receiver {
	return &receiver{rec: make([]int64, total), warm: make(chan struct{}), done: make(chan struct{})}
}

func (r *receiver) got(idx int) {
	if idx < 0 || idx >= len(r.rec) || r.rec[idx] != 0 {
		return
	}
	r.rec[idx] = wallNow()
	if idx == warmupDeltas-1 {
		close(r.warm)
	}
	if idx == len(r.rec)-1 {
		close(r.done)
	}
}

// localGroup runs its subscribers as goroutines of this process.
type localGroup struct {
	receivers []*receiver
	opened    chan error
	cancel    context.CancelFunc
	running   sync.WaitGroup
}

// subscribe runs one subscriber: it calls ready once registered (or
// failed), then records deltas into r until ctx ends.
type subscribe func(ctx context.Context, i int, r *receiver, ready func(error))

func newLocalGroup(ctx context.Context, n, total int, run subscribe) *localGroup {
	ctx, cancel := context.WithCancel(ctx)
	g := &localGroup{opened: make(chan error, n), cancel: cancel}
	sem := make(chan struct{}, openConcurrency)
	for i := range n {
		r := newReceiver(total)
		g.receivers = append(g.receivers, r)
		g.running.Go(func() {
			sem <- struct{}{}
			run(ctx, i, r, func(err error) { <-sem; g.opened <- err })
		})
	}
	return g
}

func (g *localGroup) await(ctx context.Context, s stage, limit time.Duration) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	if s == stageOpened {
		for i := range g.receivers {
			select {
			case err := <-g.opened:
				if err != nil {
					return fmt.Errorf("open subscription: %w", err)
				}
			case <-deadline.C:
				return timeoutf("%d of %d subscriptions open after %v", i, len(g.receivers), limit)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	for i, r := range g.receivers {
		signal := r.warm
		if s == stageDone {
			signal = r.done
		}
		select {
		case <-signal:
		case <-deadline.C:
			return timeoutf("%d of %d subscribers %s after %v", i, len(g.receivers), s, limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (g *localGroup) finish() ([][]int64, error) {
	g.cancel()
	g.running.Wait() // every rec is final from here on
	out := make([][]int64, len(g.receivers))
	for i, r := range g.receivers {
		out[i] = r.rec
	}
	return out, nil
}

// connectSubscriber follows conversation id through a StreamConversation
// call, as a browser would, recording each live delta's arrival.
func connectSubscriber(ctx context.Context, client convov1connect.ConversationServiceClient, id string, r *receiver, ready func(error)) {
	st, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: id}))
	if err != nil {
		ready(err)
		return
	}
	defer st.Close()
	// The first message (the snapshot) is sent once the subscription is
	// registered with the hub.
	if !st.Receive() {
		ready(fmt.Errorf("stream ended before its snapshot: %w", st.Err()))
		return
	}
	ready(nil)
	for st.Receive() {
		ev := st.Msg().GetEvent()
		if d := ev.GetBlockDelta(); d != nil && !ev.GetReplay() {
			if idx, ok := deltaIndex(d.GetContent()); ok {
				r.got(idx)
			}
		}
	}
}

// hubSubscriber follows conversation id through Hub.Open and Next, the
// layer under the Connect handler.
func hubSubscriber(ctx context.Context, hub *wire.Hub, id uuid.UUID, r *receiver, ready func(error)) {
	sub, err := hub.Open(ctx, stream.OpenParams{OwnerID: benchOwner, ConversationID: id})
	if err != nil {
		ready(err)
		return
	}
	defer sub.Close()
	ready(nil)
	for {
		item, err := sub.Next(ctx)
		if err != nil {
			return
		}
		if d := item.Payload.GetEvent().GetBlockDelta(); d != nil {
			if idx, ok := deltaIndex(d.GetContent()); ok {
				r.got(idx)
			}
		}
	}
}
