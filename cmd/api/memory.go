package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Giving memory back. What a stream held is garbage once it ends, and the
// Go heap shrinks at the next collection, but the runtime returns the
// freed pages to the operating system only gradually: after a burst of
// large streams (a thousand clients of a conversation, or snapshots made
// large with CONVO_SNAPSHOT_BYTES) the process's RSS stays high for many
// minutes. returnIdleMemory looks every interval at how much of the heap
// is free but still held, and past idleBytes gives it back at once
// (debug.FreeOSMemory: a collection, then every free page returned). A
// quiet server never pays for it; a server after a burst pays one
// collection.

const (
	memoryCheckInterval = 10 * time.Second
	// idleMemoryBytes is how much free heap the process may keep for the
	// allocations to come.
	idleMemoryBytes = 64 << 20
)

// heapFree is the heap's free memory not yet returned to the operating
// system.
const heapFree = "/memory/classes/heap/free:bytes"

// idleHeap reads heapFree.
func idleHeap() uint64 {
	sample := []metrics.Sample{{Name: heapFree}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}

// returnIdleMemory gives free heap memory back to the operating system
// whenever more than idleBytes of it is held, checking every interval
// until ctx ends.
func returnIdleMemory(ctx context.Context, logger *slog.Logger, interval time.Duration, idleBytes uint64) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if idle := idleHeap(); idle > idleBytes {
			debug.FreeOSMemory()
			logger.Debug("returned idle memory to the operating system", "idle_bytes", idle, "still_idle_bytes", idleHeap())
		}
	}
}
