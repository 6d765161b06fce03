// Package presence keeps, in memory, who is in each conversation now: the
// users viewing it (a stream with presence open, on any server of the
// deployment) and those typing in it (a report within TypingTTL). Nothing
// is stored: every server of a database keeps the whole state itself, and
// the servers tell each other of changes by NOTIFY on Channel, which each
// hears on its one LISTEN connection (package pglisten), whatever feeds its
// streams.
//
// A server announces a viewer when its first stream opens and takes it back
// when its last one closes, and repeats every Heartbeat the viewers it
// holds; the others forget a viewer not repeated within ViewerTTL, so the
// viewers of a server that crashed vanish. A server that starts (or whose
// listener reconnects) asks the others to repeat theirs at once, which
// rebuilds its state without a table. Typing lasts TypingTTL after the
// last report.
//
// Whenever the list of a conversation changes, the tracker hands the whole
// list to Options.Publish: lists are small, and a whole list has no deltas
// to get wrong.
package presence

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/pglisten"
)

// Channel is the NOTIFY channel of presence records (notify.go).
const Channel = "convo_presence"

// The defaults of Options.
const (
	// DefaultTypingTTL is how long a typing report lasts.
	DefaultTypingTTL = 6 * time.Second
	// DefaultHeartbeat is how often a server repeats its viewers.
	DefaultHeartbeat = 5 * time.Second
	// DefaultViewerTTL is how long another server's viewer lasts without
	// a repeat: three heartbeats, so one lost notification loses nothing.
	DefaultViewerTTL = 15 * time.Second
	// DefaultMaxUsers bounds the users of one conversation's list.
	DefaultMaxUsers = 64
	// DefaultMaxConversations bounds the conversations whose other
	// servers' records are kept.
	DefaultMaxConversations = 100_000
)

// Entry is one user present in a conversation.
type Entry struct {
	UserID string
	// Viewing: the user has a stream of the conversation open with
	// presence, on some server.
	Viewing bool
	// Typing: the user reported typing within TypingTTL.
	Typing bool
}

// Options configures a Tracker.
type Options struct {
	// ServerID names this server in its records; default a random one.
	ServerID string
	// Send sends one NOTIFY payload on Channel (postgres.Store's
	// NotifyPresence). Nil: nothing is sent (a single server).
	Send func(ctx context.Context, payload string) error
	// Publish receives a conversation's whole list each time it changes.
	// It runs under the tracker's lock, so that lists arrive in order: it
	// must not block nor call back into the tracker.
	Publish func(id uuid.UUID, entries []Entry)
	// TypingTTL, Heartbeat, ViewerTTL, MaxUsers and MaxConversations
	// default to the constants above.
	TypingTTL, Heartbeat, ViewerTTL time.Duration
	MaxUsers, MaxConversations      int
	Logger                          *slog.Logger
}

// Tracker is one server's presence state. Its methods are safe for
// concurrent use. Create it with New, attach it to the listener (Listen),
// and Run it.
type Tracker struct {
	opts Options
	now  func() time.Time

	mu    sync.Mutex
	rooms map[uuid.UUID]*room
	// out holds the records waiting to be sent (send.go).
	out []record
	// syncAsked: another server asked for every viewer at once.
	syncAsked bool

	wake chan struct{}
}

// room is one conversation's state.
type room struct {
	// local counts the streams open here of each user.
	local map[string]int
	// remote holds other servers' viewers: user → server → expiry.
	remote map[string]map[string]time.Time
	// typing holds each typing user's expiry.
	typing map[string]time.Time
	// last is the list last published.
	last []Entry
}

func (r *room) empty() bool { return len(r.local)+len(r.remote)+len(r.typing) == 0 }

// users counts the distinct users of the room.
func (r *room) users() int {
	n := len(r.local)
	for u := range r.remote {
		if r.local[u] == 0 {
			n++
		}
	}
	for u := range r.typing {
		if _, ok := r.remote[u]; r.local[u] == 0 && !ok {
			n++
		}
	}
	return n
}

// has reports whether user is in the room already.
func (r *room) has(user string) bool {
	_, remote := r.remote[user]
	_, typing := r.typing[user]
	return r.local[user] > 0 || remote || typing
}

// New returns a tracker; it sends nothing until Run.
func New(opts Options) *Tracker {
	if opts.ServerID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		opts.ServerID = hex.EncodeToString(b[:])
	}
	if opts.TypingTTL <= 0 {
		opts.TypingTTL = DefaultTypingTTL
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.ViewerTTL <= 0 {
		opts.ViewerTTL = DefaultViewerTTL
	}
	if opts.MaxUsers <= 0 {
		opts.MaxUsers = DefaultMaxUsers
	}
	if opts.MaxConversations <= 0 {
		opts.MaxConversations = DefaultMaxConversations
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Publish == nil {
		opts.Publish = func(uuid.UUID, []Entry) {}
	}
	return &Tracker{opts: opts, now: time.Now, rooms: make(map[uuid.UUID]*room), wake: make(chan struct{}, 1)}
}

// ServerID is the name of this server in its records.
func (t *Tracker) ServerID() string { return t.opts.ServerID }

// Listen has l deliver the other servers' records to the tracker. After
// every (re)connect of l the tracker announces its viewers and asks the
// other servers for theirs: records sent while l was away were lost.
func (t *Tracker) Listen(l *pglisten.Listener) {
	l.Listen(Channel, pglisten.Handler{Notify: t.receive, Ready: t.resync})
}

// Join counts one more stream of user following conversation id here, and
// calls current with the conversation's list once the user is in it (under
// the tracker's lock, so that no later list can arrive before it). The
// returned leave, called once when the stream ends, counts it out; the
// user stops viewing when their last stream here ends (and on other
// servers, none).
func (t *Tracker) Join(id uuid.UUID, user string, current func([]Entry)) (leave func()) {
	t.mu.Lock()
	r := t.room(id)
	r.local[user]++
	first := r.local[user] == 1
	if first {
		t.queueLocked(record{kind: kindView, conversation: id, user: user})
	}
	t.changedLocked(id, r)
	if current != nil {
		current(slices.Clone(r.last))
	}
	t.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { t.leave(id, user) }) }
}

func (t *Tracker) leave(id uuid.UUID, user string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.rooms[id]
	if !ok || r.local[user] == 0 {
		return
	}
	r.local[user]--
	if r.local[user] == 0 {
		delete(r.local, user)
		t.queueLocked(record{kind: kindLeave, conversation: id, user: user})
	}
	t.changedLocked(id, r)
}

// SetTyping records that user is typing in conversation id (for
// TypingTTL), or stopped, and tells the other servers. The caller checks
// that the user may read the conversation. Past MaxUsers a user not yet
// present is not added.
func (t *Tracker) SetTyping(id uuid.UUID, user string, typing bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.setTypingLocked(id, user, typing) {
		return
	}
	kind := kindIdle
	if typing {
		kind = kindTyping
	}
	t.queueLocked(record{kind: kind, conversation: id, user: user})
}

// setTypingLocked applies a typing report, of this server or another, and
// reports whether it was taken.
func (t *Tracker) setTypingLocked(id uuid.UUID, user string, typing bool) bool {
	r, ok := t.rooms[id]
	if !typing {
		if !ok {
			return true
		}
		delete(r.typing, user)
		t.changedLocked(id, r)
		return true
	}
	if !ok {
		r = t.room(id)
	}
	if !r.has(user) && r.users() >= t.opts.MaxUsers {
		t.changedLocked(id, r) // drops the room when it was made for this
		return false
	}
	r.typing[user] = t.now().Add(t.opts.TypingTTL)
	t.changedLocked(id, r)
	return true
}

// Current returns the list of conversation id now (empty when nobody is
// there).
func (t *Tracker) Current(id uuid.UUID) []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.rooms[id]; ok {
		return slices.Clone(r.last)
	}
	return nil
}

// room returns conversation id's room, making it. The caller holds t.mu.
func (t *Tracker) room(id uuid.UUID) *room {
	r, ok := t.rooms[id]
	if !ok {
		r = &room{local: map[string]int{}, remote: map[string]map[string]time.Time{}, typing: map[string]time.Time{}}
		t.rooms[id] = r
	}
	return r
}

// changedLocked publishes the room's list when it differs from the last
// one, and drops an empty room. The caller holds t.mu.
func (t *Tracker) changedLocked(id uuid.UUID, r *room) {
	list := r.list(t.now(), t.opts.MaxUsers)
	if !slices.Equal(list, r.last) {
		r.last = list
		t.opts.Publish(id, slices.Clone(list))
	}
	if r.empty() {
		delete(t.rooms, id)
	}
}

// list is the room's list at now: every user, sorted by id, at most max.
func (r *room) list(now time.Time, max int) []Entry {
	byUser := map[string]*Entry{}
	get := func(u string) *Entry {
		e, ok := byUser[u]
		if !ok {
			e = &Entry{UserID: u}
			byUser[u] = e
		}
		return e
	}
	for u := range r.local {
		get(u).Viewing = true
	}
	for u, servers := range r.remote {
		for _, exp := range servers {
			if exp.After(now) {
				get(u).Viewing = true
				break
			}
		}
	}
	for u, exp := range r.typing {
		if exp.After(now) {
			get(u).Typing = true
		}
	}
	if len(byUser) == 0 {
		return nil
	}
	out := make([]Entry, 0, len(byUser))
	for _, e := range byUser {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.UserID, b.UserID) })
	if len(out) > max {
		out = out[:max]
	}
	return out
}

// sweep forgets the typing reports and other servers' viewers that
// expired, publishing the lists that change.
func (t *Tracker) sweep() {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, r := range t.rooms {
		expired := false
		for u, exp := range r.typing {
			if !exp.After(now) {
				delete(r.typing, u)
				expired = true
			}
		}
		for u, servers := range r.remote {
			for s, exp := range servers {
				if !exp.After(now) {
					delete(servers, s)
					expired = true
				}
			}
			if len(servers) == 0 {
				delete(r.remote, u)
			}
		}
		if expired {
			t.changedLocked(id, r)
		}
	}
}
