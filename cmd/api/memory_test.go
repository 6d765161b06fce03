package main

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"
)

var sink [][]byte

// TestReturnIdleMemory: after a burst of allocations is dropped, the free
// heap the process holds falls back under the bound within a check or
// two, rather than over the minutes the runtime's background scavenger
// takes.
func TestReturnIdleMemory(t *testing.T) {
	for range 256 {
		sink = append(sink, make([]byte, 1<<20))
	}
	sink = nil
	runtime.GC()
	if idle := idleHeap(); idle < 128<<20 {
		t.Fatalf("a dropped burst of 256 MB left only %d MB of idle heap: the test's premise no longer holds", idle>>20)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go returnIdleMemory(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), 10*time.Millisecond, 64<<20)
	eventually(t, "the idle heap is back under 64 MB", func() bool { return idleHeap() < 64<<20 })
}
