package postgres

import (
	"testing"
	"time"
)

// TestSendGroupCap: a group takes what commits in about sendGroupTarget
// (never fewer than minSendGroup), and a share of a queue too long for the
// lanes, up to maxSendGroup.
func TestSendGroupCap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		perSend       time.Duration
		queued, lanes int
		want          int
	}{
		{0, 10, 4, firstSendGroup},                       // nothing measured yet
		{2500 * time.Microsecond, 96, 4, 10},             // 25 ms of 2.5 ms sends
		{100 * time.Millisecond, 20, 4, minSendGroup},    // slow sends: the floor
		{10 * time.Microsecond, 20, 4, maxSendGroup},     // fast sends: the ceiling
		{2500 * time.Microsecond, 1000, 4, maxSendGroup}, // a long queue: full groups
		{2500 * time.Microsecond, 240, 4, 15},            // a quarter of a lane's share
	} {
		if got := groupCapFor(c.perSend, c.queued, c.lanes); got != c.want {
			t.Errorf("groupCapFor(%v, %d queued, %d lanes) = %d, want %d", c.perSend, c.queued, c.lanes, got, c.want)
		}
	}
}
