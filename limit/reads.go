package limit

import (
	"sync"
	"time"

	"github.com/convo-dev/convo/conversation"
)

// readRetryAfter is the Retry-After of a read refused because the user
// has too many running: one read ends within the write timeout, and
// usually within milliseconds.
const readRetryAfter = time.Second

// Reads caps the whole-conversation reads each user has running at once
// on this server: GetConversation, ListMessages, the history export and
// the AI SDK's messages. Each holds up to a snapshot's worth of a
// conversation (CONVO_SNAPSHOT_BYTES) until its client has read the
// answer, so a client that asks many and reads none holds at most the cap
// times that. Its methods are safe for concurrent use; a nil *Reads
// limits nothing.
type Reads struct {
	perUser int

	mu    sync.Mutex
	users map[string]int
}

// NewReads returns a cap of perUser reads running at once per user; 0 or
// less returns nil: no cap.
func NewReads(perUser int) *Reads {
	if perUser <= 0 {
		return nil
	}
	return &Reads{perUser: perUser, users: make(map[string]int)}
}

// Acquire takes a place among user's running reads. It returns the
// function that gives it back once the answer is written (safe to call
// more than once), or a ResourceExhausted error naming the limit, with a
// RetryAfter, taking nothing.
func (r *Reads) Acquire(user string) (release func(), err error) {
	if r == nil {
		return func() {}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.users[user] >= r.perUser {
		return nil, &conversation.Error{
			Code: conversation.ResourceExhausted,
			Message: "read limit reached: this user already has " + itoa(r.users[user]) +
				" conversation reads running on this server, the maximum (max reads per user); retry after the delay given",
			RetryAfter: readRetryAfter,
		}
	}
	r.users[user]++
	var once sync.Once
	return func() { once.Do(func() { r.release(user) }) }, nil
}

func (r *Reads) release(user string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.users[user]--; r.users[user] <= 0 {
		delete(r.users, user)
	}
}
