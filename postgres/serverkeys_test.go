package postgres_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/convo-dev/convo/postgres"
)

// TestServerKeyIsSharedAndKept checks that the first ServerKey stores a
// random key of ServerKeyBytes, and that every later caller, several at
// once through other stores on the same database included, gets that same
// key, while another name gets its own.
func TestServerKeyIsSharedAndKept(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	const callers = 8
	keys := make([][]byte, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { keys[i], errs[i] = postgres.New(tb.pool).ServerKey(ctx, "file_url") })
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("caller %d got another key than caller 0", i)
		}
	}
	if len(keys[0]) != postgres.ServerKeyBytes || bytes.Equal(keys[0], make([]byte, postgres.ServerKeyBytes)) {
		t.Fatalf("key = %x; want %d random bytes", keys[0], postgres.ServerKeyBytes)
	}
	again, err := tb.store.ServerKey(ctx, "file_url")
	if err != nil || !bytes.Equal(again, keys[0]) {
		t.Fatalf("asked again: %x, %v; want the stored key", again, err)
	}
	other, err := tb.store.ServerKey(ctx, "other")
	if err != nil || bytes.Equal(other, keys[0]) {
		t.Fatalf("another name: %x, %v; want a key of its own", other, err)
	}
	var stored int
	if err := tb.pool.QueryRow(ctx, "SELECT count(*) FROM convo.server_keys").Scan(&stored); err != nil || stored != 2 {
		t.Fatalf("convo.server_keys holds %d rows (%v); want 2", stored, err)
	}
}
