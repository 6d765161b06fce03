package limit

import (
	"sync"

	"github.com/convo-dev/convo/conversation"
)

// Streams counts the open streams of each user and of the server. Its
// methods are safe for concurrent use; a nil *Streams limits nothing.
type Streams struct {
	perUser, total int

	mu    sync.Mutex
	users map[string]int
	open  int
}

// NewStreams returns a counter that allows at most perUser streams per
// user and total streams in all; 0 leaves that bound off.
func NewStreams(perUser, total int) *Streams {
	return &Streams{perUser: max(perUser, 0), total: max(total, 0), users: make(map[string]int)}
}

// Acquire takes one stream for user. It returns the function that gives
// it back (safe to call more than once), or a ResourceExhausted error
// naming the limit that is reached, taking nothing.
func (s *Streams) Acquire(user string) (release func(), err error) {
	if s == nil {
		return func() {}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total > 0 && s.open >= s.total {
		return nil, conversation.Errorf(conversation.ResourceExhausted,
			"stream limit reached: this server already serves %d streams, its maximum (max streams per server); retry later or on another server", s.open)
	}
	if s.perUser > 0 && s.users[user] >= s.perUser {
		return nil, conversation.Errorf(conversation.ResourceExhausted,
			"stream limit reached: this user already has %d streams open on this server, the maximum (max streams per user); close one first", s.users[user])
	}
	s.users[user]++
	s.open++
	var once sync.Once
	return func() { once.Do(func() { s.release(user) }) }, nil
}

func (s *Streams) release(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if s.users[user]--; s.users[user] <= 0 {
		delete(s.users, user)
	}
}

// Open returns how many streams user holds, and the server in all.
func (s *Streams) Open(user string) (users, total int) {
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.users[user], s.open
}
