package limit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// buckets is a token bucket per user: each call of take takes one token,
// and a user's bucket refills at a steady rate up to its burst. Buckets
// that refilled completely are dropped every sweepEvery, so the map holds
// only users who were active recently. Safe for concurrent use.
type buckets struct {
	rate  rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	users   map[string]*rate.Limiter
	sweepAt time.Time
}

// sweepEvery is how often full buckets are dropped.
const sweepEvery = time.Minute

func newBuckets(perSecond float64, burst int) buckets {
	return buckets{rate: rate.Limit(perSecond), burst: max(burst, 1), now: time.Now, users: make(map[string]*rate.Limiter)}
}

// take takes one token of user and returns 0; when the bucket is empty it
// takes nothing and returns how long until the next token is due.
func (b *buckets) take(user string) time.Duration {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.After(b.sweepAt) {
		for u, l := range b.users {
			if l.TokensAt(now) >= float64(b.burst) {
				delete(b.users, u)
			}
		}
		b.sweepAt = now.Add(sweepEvery)
	}
	l, ok := b.users[user]
	if !ok {
		l = rate.NewLimiter(b.rate, b.burst)
		b.users[user] = l
	}
	r := l.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if delay > 0 {
		r.CancelAt(now)
	}
	return delay
}
