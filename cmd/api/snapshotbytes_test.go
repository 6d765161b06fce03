package main

import (
	"context"
	"testing"
)

// TestSnapshotBytesBoundsSwitches: CONVO_SNAPSHOT_BYTES reaches the
// connections of the API's pool, whose statements change paths, as the
// bound on a branchSwitched's messages (convo._event_bytes).
func TestSnapshotBytesBoundsSwitches(t *testing.T) {
	t.Parallel()
	m := startMain(t, map[string]string{"CONVO_SNAPSHOT_BYTES": "5000"})
	ctx := context.Background()
	for i := range 3 {
		conn, err := m.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		var got int64
		if err := conn.QueryRow(ctx, `SELECT convo._event_bytes()`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != 5000 {
			t.Errorf("connection %d of the API's pool: convo._event_bytes() = %d; want CONVO_SNAPSHOT_BYTES, 5000", i, got)
		}
	}
}
