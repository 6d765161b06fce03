package limit

import (
	"github.com/convo-dev/convo/conversation"
)

// Writes is a token bucket per user on writes (sending messages, renaming,
// voting, feedback …): each write takes one token, and a user's bucket
// refills at a steady rate up to its burst. Its methods are safe for
// concurrent use; a nil *Writes limits nothing.
type Writes struct {
	buckets
}

// NewWrites returns a limiter allowing each user perSecond writes a
// second on average, in bursts of up to burst (at least 1). A perSecond of
// 0 or less returns nil: no limit.
func NewWrites(perSecond float64, burst int) *Writes {
	if perSecond <= 0 {
		return nil
	}
	return &Writes{buckets: newBuckets(perSecond, burst)}
}

// Allow takes one write token of user. When the bucket is empty it takes
// nothing and returns a ResourceExhausted error naming the limit, whose
// RetryAfter is when the next token is due.
func (w *Writes) Allow(user string) error {
	if w == nil {
		return nil
	}
	delay := w.take(user)
	if delay == 0 {
		return nil
	}
	return &conversation.Error{
		Code: conversation.ResourceExhausted,
		Message: "write rate limit reached: at most " + formatRate(float64(w.rate)) +
			" writes a second per user, in bursts of " + itoa(w.burst) + " (write rate limit); retry after the delay given",
		RetryAfter: delay,
	}
}
