package worker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/postgres/dbq"
)

// recordingAPI records appends without a database.
type recordingAPI struct {
	sqlAPI
	mu      sync.Mutex
	appends []string
	ended   []uuid.UUID
}

func (a *recordingAPI) BlockAppend(_ context.Context, arg dbq.BlockAppendParams) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.appends = append(a.appends, arg.Delta)
	return nil
}

func (a *recordingAPI) BlockEnd(_ context.Context, arg dbq.BlockEndParams) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ended = append(a.ended, arg.BlockID)
	return nil
}

func TestWriterThresholds(t *testing.T) {
	t.Parallel()
	newTestWriter := func(interval time.Duration, maxBytes int) (*writer, *recordingAPI, context.CancelCauseFunc) {
		api := &recordingAPI{}
		ctx, cancel := context.WithCancelCause(context.Background())
		w := newWriter(ctx, cancel, api, uuid.New(), &Config{CallTimeout: time.Second, BatchInterval: interval, BatchBytes: maxBytes})
		t.Cleanup(func() { cancel(nil); w.close() })
		return w, api, cancel
	}
	block := target{id: uuid.New()}

	t.Run("SizeThreshold", func(t *testing.T) {
		t.Parallel()
		w, api, _ := newTestWriter(time.Hour, 10)
		for i := range 25 {
			if err := w.appendText(block, fmt.Sprint(i%10)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.endBlock(block.id, nil); err != nil {
			t.Fatal(err)
		}
		// The first digit goes at once (nothing written for an hour), then
		// every ten bytes, then the rest at the end.
		want := []string{"0", "1234567890", "1234567890", "1234"}
		if fmt.Sprint(api.appends) != fmt.Sprint(want) || len(api.ended) != 1 {
			t.Errorf("appends %q, ended %v", api.appends, api.ended)
		}
	})

	t.Run("NoWritesAfterStop", func(t *testing.T) {
		t.Parallel()
		w, api, cancel := newTestWriter(time.Hour, 1000)
		_ = w.appendText(block, "a")
		_ = w.appendText(block, "b") // waits for the interval
		cancel(errCancelled)
		if err := w.endBlock(block.id, nil); err != errCancelled {
			t.Errorf("end after stop: %v", err)
		}
		if err := w.appendText(block, "c"); err != errCancelled {
			t.Errorf("append after stop: %v", err)
		}
		if fmt.Sprint(api.appends) != "[a]" || len(api.ended) != 0 {
			t.Errorf("appends %q, ended %v", api.appends, api.ended)
		}
	})
}
