package backoff

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	b := New(100*time.Millisecond, time.Second)
	steps := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for round := range 2 {
		for i, step := range steps {
			step *= time.Millisecond
			if d := b.Next(); d < step/2 || d > step {
				t.Fatalf("round %d, attempt %d: delay %v, want within [%v, %v]", round, i, d, step/2, step)
			}
		}
		b.Reset()
	}
}
