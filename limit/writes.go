package limit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/convo-dev/convo/conversation"
)

// Writes is a token bucket per user on writes (sending messages, renaming,
// voting, feedback …): each write takes one token, and a user's bucket
// refills at a steady rate up to its burst. Its methods are safe for
// concurrent use; a nil *Writes limits nothing.
type Writes struct {
	rate  rate.Limit
	burst int
	now   func() time.Time

	mu    sync.Mutex
	users map[string]*rate.Limiter
	// sweepAt is when buckets that refilled completely are next dropped,
	// so the map holds only users who wrote recently.
	sweepAt time.Time
}

// sweepEvery is how often full buckets are dropped.
const sweepEvery = time.Minute

// NewWrites returns a limiter allowing each user perSecond writes a
// second on average, in bursts of up to burst (at least 1). A perSecond of
// 0 or less returns nil: no limit.
func NewWrites(perSecond float64, burst int) *Writes {
	if perSecond <= 0 {
		return nil
	}
	return &Writes{rate: rate.Limit(perSecond), burst: max(burst, 1), now: time.Now, users: make(map[string]*rate.Limiter)}
}

// Allow takes one write token of user. When the bucket is empty it takes
// nothing and returns a ResourceExhausted error naming the limit, whose
// RetryAfter is when the next token is due.
func (w *Writes) Allow(user string) error {
	if w == nil {
		return nil
	}
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.After(w.sweepAt) {
		for u, l := range w.users {
			if l.TokensAt(now) >= float64(w.burst) {
				delete(w.users, u)
			}
		}
		w.sweepAt = now.Add(sweepEvery)
	}
	l, ok := w.users[user]
	if !ok {
		l = rate.NewLimiter(w.rate, w.burst)
		w.users[user] = l
	}
	r := l.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if delay == 0 {
		return nil
	}
	r.CancelAt(now)
	return &conversation.Error{
		Code: conversation.ResourceExhausted,
		Message: "write rate limit reached: at most " + formatRate(float64(w.rate)) +
			" writes a second per user, in bursts of " + itoa(w.burst) + " (write rate limit); retry after the delay given",
		RetryAfter: delay,
	}
}
