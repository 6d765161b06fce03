package limit

import (
	"github.com/convo-dev/convo/conversation"
)

// The default rate of typing reports (SetTyping): a client reports when
// its user starts typing and again every few seconds while they go on
// (a report lasts 6 s), so 2 a second in bursts of 5 leaves room for
// several tabs, and refuses a client that reports every keystroke.
const (
	DefaultTypingRate  = 2.0
	DefaultTypingBurst = 5
)

// Typing is a token bucket per user on typing reports, apart from the
// write rate (a typing report writes nothing). Its methods are safe for
// concurrent use; a nil *Typing limits nothing.
type Typing struct {
	buckets
}

// NewTyping returns a limiter allowing each user perSecond typing reports
// a second on average, in bursts of up to burst (at least 1). A perSecond
// of 0 or less returns nil: no limit.
func NewTyping(perSecond float64, burst int) *Typing {
	if perSecond <= 0 {
		return nil
	}
	return &Typing{buckets: newBuckets(perSecond, burst)}
}

// Allow takes one token of user. When the bucket is empty it takes nothing
// and returns a ResourceExhausted error naming the limit, whose RetryAfter
// is when the next token is due.
func (t *Typing) Allow(user string) error {
	if t == nil {
		return nil
	}
	delay := t.take(user)
	if delay == 0 {
		return nil
	}
	return &conversation.Error{
		Code: conversation.ResourceExhausted,
		Message: "typing rate limit reached: at most " + formatRate(float64(t.rate)) +
			" typing reports a second per user, in bursts of " + itoa(t.burst) + "; retry after the delay given",
		RetryAfter: delay,
	}
}
