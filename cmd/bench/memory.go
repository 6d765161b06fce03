package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

// MemoryResult is the memory an idle subscriber holds, after GC.
type MemoryResult struct {
	Feed string
	// Stack is what was measured: "connect" (the server's side of idle
	// StreamConversation streams, whose clients run in a child process) or
	// "hub" (Hub.Open with a goroutine waiting in Next, as the handler's).
	Stack       string
	Subscribers int
	// Heap and Stacks are bytes per subscriber: the growth of the live heap
	// (runtime.MemStats.HeapAlloc) and of goroutine stacks (StackInuse).
	Heap, Stacks float64
	// ClientHeap and ClientStacks are the same for the client process
	// (connect only): what each stream costs a Go client.
	ClientHeap, ClientStacks float64
}

// Total is heap plus stacks per subscriber.
func (r MemoryResult) Total() float64 { return r.Heap + r.Stacks }

type memSample struct{ heap, stacks uint64 }

// settledMem collects garbage and reads the live heap and stack sizes.
func settledMem() memSample {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return memSample{heap: ms.HeapAlloc, stacks: ms.StackInuse}
}

func perEach(after, before uint64, n int) float64 {
	return (float64(after) - float64(before)) / float64(n)
}

func (m *Main) runMemory(ctx context.Context, sys *system) error {
	n := m.Config.IdleSubscribers
	if n == 0 {
		return nil
	}
	// Each idle subscriber follows a conversation of its own, so the
	// figure includes the hub's per-conversation state.
	ids := make([]uuid.UUID, n)
	for i := range ids {
		c, err := m.store.CreateConversation(ctx, benchOwner, "idle")
		if err != nil {
			return err
		}
		ids[i] = c.ID
	}
	if err := m.memoryConnect(ctx, sys, ids); err != nil {
		return fmt.Errorf("connect streams: %w", err)
	}
	if err := m.memoryHub(ctx, sys, ids); err != nil {
		return fmt.Errorf("hub subscriptions: %w", err)
	}
	return nil
}

// memoryConnect holds len(ids) idle StreamConversation streams open from a
// client process and measures this (the server's) process.
func (m *Main) memoryConnect(ctx context.Context, sys *system, ids []uuid.UUID) error {
	// The latency scenarios' streams end asynchronously.
	if err := awaitSubscribers(ctx, sys.hub, 0, 30*time.Second); err != nil {
		return err
	}
	if err := m.awaitQuiet(ctx); err != nil {
		return err
	}
	before := settledMem()
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = id.String()
	}
	clients, err := m.startClients(ctx, sys.url, "web", 0, names)
	if err != nil {
		return err
	}
	defer clients.finish() //nolint:errcheck // nothing recorded
	if err := clients.await(ctx, stageOpened, 3*time.Minute); err != nil {
		return err
	}
	if got := sys.hub.Stats().Subscribers; got != len(ids) {
		return fmt.Errorf("the hub has %d subscribers, want %d", got, len(ids))
	}
	after := settledMem()
	if err := m.writeHeapProfile(); err != nil {
		return err
	}
	m.Results.Memory = append(m.Results.Memory, MemoryResult{
		Feed: sys.feed, Stack: "connect", Subscribers: len(ids),
		Heap: perEach(after.heap, before.heap, len(ids)), Stacks: perEach(after.stacks, before.stacks, len(ids)),
		ClientHeap: clients.heap, ClientStacks: clients.stacks,
	})
	return nil
}

// memoryHub opens len(ids) hub subscriptions in this process, each with a
// goroutine waiting in Next as the Connect handler's does.
func (m *Main) memoryHub(ctx context.Context, sys *system, ids []uuid.UUID) error {
	// The child's streams of memoryConnect end asynchronously.
	if err := awaitSubscribers(ctx, sys.hub, 0, 30*time.Second); err != nil {
		return err
	}
	before := settledMem()
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	opened := make(chan error, len(ids))
	sem := make(chan struct{}, openConcurrency)
	for _, id := range ids {
		wg.Go(func() {
			sem <- struct{}{}
			sub, err := sys.hub.Open(subCtx, stream.OpenParams{OwnerID: benchOwner, ConversationID: id})
			<-sem
			opened <- err
			if err != nil {
				return
			}
			defer sub.Close()
			for {
				if _, err := sub.Next(subCtx); err != nil {
					return
				}
			}
		})
	}
	for range ids {
		if err := <-opened; err != nil {
			return fmt.Errorf("open subscription: %w", err)
		}
	}
	after := settledMem()
	m.Results.Memory = append(m.Results.Memory, MemoryResult{
		Feed: sys.feed, Stack: "hub", Subscribers: len(ids),
		Heap: perEach(after.heap, before.heap, len(ids)), Stacks: perEach(after.stacks, before.stacks, len(ids)),
	})
	return nil
}

// awaitSubscribers waits until the hub has want subscribers.
func awaitSubscribers(ctx context.Context, hub *wire.Hub, want int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for hub.Stats().Subscribers != want {
		if time.Now().After(deadline) {
			return timeoutf("the hub has %d subscribers after %v, want %d", hub.Stats().Subscribers, limit, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// writeHeapProfile writes the heap profile of --memprofile, once per run.
func (m *Main) writeHeapProfile() error {
	if m.Config.MemProfile == "" || m.wroteHeapProfile {
		return nil
	}
	m.wroteHeapProfile = true
	f, err := os.Create(m.Config.MemProfile)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.WriteHeapProfile(f)
}
