package limit

import (
	"sync"
	"time"

	"github.com/convo-dev/convo/conversation"
)

// MaxUserSearches is how many searches one user may have running at once
// on one server.
const MaxUserSearches = 2

// searchRetryAfter is the Retry-After of a search refused because too many
// run: one search is bounded by the search timeout, a few seconds.
const searchRetryAfter = time.Second

// Searches limits full-text searches, which cost the database far more
// than other reads: a token bucket per user (each search takes one token;
// it is not the write rate, see NewSearches), at most MaxUserSearches
// running at once per user, and at most a given number running at once on
// the server. Its methods are safe for concurrent use; a nil *Searches
// limits nothing.
type Searches struct {
	// rate is nil without a per-user rate.
	rate       *buckets
	maxRunning int

	mu      sync.Mutex
	running int
	users   map[string]int
}

// NewSearches returns a limiter allowing each user perSecond searches a
// second on average, in bursts of up to burst (at least 1), and the server
// maxRunning searches at once. A perSecond of 0 or less leaves the rate
// off, a maxRunning of 0 or less the server's cap (a user still runs at
// most MaxUserSearches at once); with both off it returns nil: no limit.
//
// Searches have their own rate rather than taking write tokens: a search
// box that searches as the user types would spend the write budget, and a
// user who had searched could then not send a message.
func NewSearches(perSecond float64, burst, maxRunning int) *Searches {
	if perSecond <= 0 && maxRunning <= 0 {
		return nil
	}
	s := &Searches{maxRunning: max(maxRunning, 0), users: make(map[string]int)}
	if perSecond > 0 {
		b := newBuckets(perSecond, burst)
		s.rate = &b
	}
	return s
}

// Acquire takes a search of user: a token of its rate and a place among
// the searches running. It returns the function that gives the place back
// when the search ends (safe to call more than once), or a
// ResourceExhausted error naming the limit reached, with a RetryAfter,
// taking nothing.
func (s *Searches) Acquire(user string) (release func(), err error) {
	if s == nil {
		return func() {}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maxRunning > 0 && s.running >= s.maxRunning {
		return nil, &conversation.Error{
			Code: conversation.ResourceExhausted,
			Message: "search limit reached: this server already runs " + itoa(s.running) +
				" searches, its maximum (max searches per server); retry after the delay given",
			RetryAfter: searchRetryAfter,
		}
	}
	if s.users[user] >= MaxUserSearches {
		return nil, &conversation.Error{
			Code: conversation.ResourceExhausted,
			Message: "search limit reached: this user already has " + itoa(s.users[user]) +
				" searches running on this server, the maximum (max searches per user); retry when one ends",
			RetryAfter: searchRetryAfter,
		}
	}
	if s.rate != nil {
		if delay := s.rate.take(user); delay > 0 {
			return nil, &conversation.Error{
				Code: conversation.ResourceExhausted,
				Message: "search rate limit reached: at most " + formatRate(float64(s.rate.rate)) +
					" searches a second per user, in bursts of " + itoa(s.rate.burst) + " (search rate limit); retry after the delay given",
				RetryAfter: delay,
			}
		}
	}
	s.running++
	s.users[user]++
	var once sync.Once
	return func() { once.Do(func() { s.release(user) }) }, nil
}

func (s *Searches) release(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	if s.users[user]--; s.users[user] <= 0 {
		delete(s.users, user)
	}
}
