// Package backoff spaces out retries: a delay that doubles from a minimum
// to a maximum, with jitter so that many servers do not retry in step.
// The listener, the logical replication feed and the hub's reads use it.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff is the delay before the next retry. It is not safe for
// concurrent use.
type Backoff struct {
	min, max, cur time.Duration
}

// New returns a Backoff whose first delay is about min and whose delays
// never exceed max.
func New(min, max time.Duration) *Backoff { return &Backoff{min: min, max: max} }

// Next returns the delay before the next attempt: the current step (min
// at first, doubling up to max), less up to half of it at random.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(b.cur*2, b.max)
	}
	return b.cur/2 + rand.N(b.cur/2+1)
}

// Reset starts over from min, after a success.
func (b *Backoff) Reset() { b.cur = 0 }
