package stream

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/firstdelta"
)

// MaxResume is the most events a resume (afterSeq) replays; further behind,
// the subscription starts from a snapshot instead, which is smaller.
const MaxResume = 10_000

// The errors that end a subscription. Every one is a *conversation.Error:
// the Resumable ones (Unavailable) come back from Next as ResumeAfter
// copies that carry the seq to resume after, and match with errors.Is.
var (
	// ErrFellBehind ends a subscription whose queue overflowed because its
	// client read too slowly. Every event before the error was delivered in
	// order; the client resumes after the last one it applied.
	ErrFellBehind = conversation.StreamEnd("subscriber fell behind the conversation's events")

	// ErrEventsCompacted ends a subscription whose next events were merged
	// by compaction (convo.compact_prompt) before it read them; only a
	// subscriber far behind can meet it. Resuming from its last seq gives
	// a snapshot.
	ErrEventsCompacted = conversation.StreamEnd("the events after this point were compacted")

	// ErrPathChanged ends the subscription of a client that did not ask
	// for branchSwitched events (OpenParams.Branches) just before one:
	// the conversation's active path changed (an edit, a regeneration, a
	// switch), which the events it knows cannot say. Resuming from its
	// last seq gives a snapshot, which holds the new path.
	ErrPathChanged = conversation.StreamEnd("the conversation's active path changed (an edit, a regeneration or a switch)")

	// ErrClosed ends subscriptions when the hub stops, and refuses new ones
	// once it drains (the server is shutting down): the client reconnects,
	// to another server, and resumes.
	ErrClosed = conversation.StreamEnd("server is shutting down; reconnect and resume")

	// ErrDeleted ends the subscriptions of a deleted conversation; there
	// is nothing to resume.
	ErrDeleted = conversation.Errorf(conversation.NotFound, "the conversation was deleted")

	// ErrRemoved ends a user's subscriptions of a conversation when the
	// user is removed from its members: NotFound, as the conversation is
	// to the user from then on (a stream opened again is refused so).
	ErrRemoved = conversation.Errorf(conversation.NotFound, "you were removed from the conversation's members")

	// ErrShareEnded ends the subscriptions opened for a share link
	// (OpenParams.ShareID) when the share is revoked: NotFound, worded as
	// for a token that opens nothing (convo.share_conversation).
	ErrShareEnded = conversation.Errorf(conversation.NotFound, "share does not exist")
)

// OpenParams names what to follow.
type OpenParams struct {
	// OwnerID is the user who follows the conversation: its owner or a
	// member.
	OwnerID        string
	ConversationID uuid.UUID
	// AfterSeq, when set, resumes after that seq without a snapshot, if
	// the events after it are all still held (at most MaxResume of them)
	// and, without Branches, none of them is a branchSwitched.
	AfterSeq *int64
	// Branches says the client folds branchSwitched events. Without it
	// the subscription ends with ErrPathChanged before one, and a resume
	// across one starts from a snapshot: such a client only ever sees the
	// active path through snapshots and the events it knows.
	Branches bool
	// Ephemeral says the client takes ephemeral items (Hub.Ephemeral,
	// Subscription.SetEphemeral): presence. Without it none is offered.
	Ephemeral bool
	// ShareID, when set, says the subscription reads for a share link
	// (docs/api.md, "Share links"), OwnerID being the conversation's
	// owner whose reads it makes: a shareRevoked of that share ends it
	// with ErrShareEnded, on every server, and its place under
	// HubOptions.Streams is counted for the share, not the owner.
	ShareID uuid.UUID
}

// Subscription follows one conversation for one client. It is not safe for
// concurrent use; Close it when done.
type Subscription[T any] struct {
	hub            *Hub[T]
	conversationID uuid.UUID
	// userID is whose subscription it is (OpenParams.OwnerID): a
	// memberRemoved of that user ends it (Hub.publish).
	userID string
	// shareID is OpenParams.ShareID: a shareRevoked of it ends the
	// subscription.
	shareID uuid.UUID
	// release gives back the subscription's place under HubOptions.Streams.
	release func()

	// queue holds the items the hub offered and Next has not taken yet,
	// from head on. It is allocated only while items wait, so an idle
	// subscription holds no queue storage. qmu guards queue and head: the
	// hub offers under hub.mu, Next takes without it.
	qmu   sync.Mutex
	queue []*Item[T]
	head  int
	// signal wakes a waiting Next after an offer (capacity 1: one wake-up
	// covers any number of offers).
	signal chan struct{}
	endCh  chan struct{}
	ended  *conversation.Error // set under hub.mu before endCh closes
	// notify, when set (SetNotify), is called under hub.mu after every
	// offer and at the end.
	notify func()

	// cursor is the seq of the last event Next returned (or the
	// snapshot's seq); pending are events to return before reading ch.
	cursor   int64
	pending  []*Item[T]
	snapshot *conversation.State
	// branches is OpenParams.Branches.
	branches bool
	// ephemeral is OpenParams.Ephemeral; eph is the waiting ephemeral
	// item (ephemeral.go), guarded by qmu, as onClose is.
	ephemeral bool
	eph       *Item[T]
	onClose   []func()
}

// Open registers a subscription with the hub and then reads where it
// starts: the events after p.AfterSeq when they are all held, otherwise a
// snapshot. Registering first means nothing committed after the start can
// be missed; Next drops what the snapshot already holds. It returns the
// store's errors (NotFound for an unknown or foreign conversation), and
// ResourceExhausted past a bound of HubOptions.Streams.
func (h *Hub[T]) Open(ctx context.Context, p OpenParams) (*Subscription[T], error) {
	holder := p.OwnerID
	if p.ShareID != uuid.Nil {
		holder = "share:" + p.ShareID.String()
	}
	release, err := h.opts.Streams.Acquire(holder)
	if err != nil {
		return nil, err
	}
	s := &Subscription[T]{
		hub: h, conversationID: p.ConversationID, userID: p.OwnerID, shareID: p.ShareID, release: release,
		signal: make(chan struct{}, 1), endCh: make(chan struct{}), branches: p.Branches,
		ephemeral: p.Ephemeral,
	}
	if err := h.register(s); err != nil {
		release()
		return nil, err
	}
	if err := s.begin(ctx, p); err != nil {
		h.unregister(s)
		return nil, err
	}
	return s, nil
}

func (s *Subscription[T]) begin(ctx context.Context, p OpenParams) error {
	if p.AfterSeq != nil {
		conv, err := s.hub.opts.Store.Conversation(ctx, p.OwnerID, p.ConversationID)
		if err != nil {
			return err
		}
		after := *p.AfterSeq
		if behind := conv.LastSeq - after; after >= 0 && behind >= 0 && behind <= MaxResume {
			events, err := s.hub.opts.Store.EventsAfter(ctx, p.ConversationID, after, int(behind))
			if err != nil {
				return err
			}
			if held(events, after, conv.LastSeq) && (p.Branches || !pathChanged(events)) {
				s.cursor = after
				s.pending = s.hub.items(events)
				s.hub.start(s, conv.LastSeq)
				return nil
			}
		}
	}
	st, err := s.hub.opts.Snapshots.RecentState(ctx, p.OwnerID, p.ConversationID, s.hub.opts.SnapshotBytes)
	if err != nil {
		return err
	}
	s.snapshot = &st
	s.cursor = st.Seq
	s.hub.start(s, st.Seq)
	return nil
}

// held reports whether events are exactly after+1 … last.
func held(events []conversation.Event, after, last int64) bool {
	if int64(len(events)) != last-after {
		return false
	}
	for i, e := range events {
		if e.Seq != after+int64(i)+1 {
			return false
		}
	}
	return true
}

// pathChanged reports whether one of events changed the active path.
func pathChanged(events []conversation.Event) bool {
	for _, e := range events {
		if e.Kind == conversation.EventBranchSwitched {
			return true
		}
	}
	return false
}

// Snapshot returns the state the subscription started from, or false when
// it resumed after a seq instead.
func (s *Subscription[T]) Snapshot() (conversation.State, bool) {
	if s.snapshot == nil {
		return conversation.State{}, false
	}
	return *s.snapshot, true
}

// ReleaseSnapshot forgets the snapshot once the stream has sent it, so that
// a long-lived stream does not hold a copy of its conversation; Snapshot
// then reports false.
func (s *Subscription[T]) ReleaseSnapshot() { s.snapshot = nil }

// Next returns the conversation's next event after the snapshot (or the
// resume point), waiting for it to be committed. Events come exactly once,
// in seq order; an ephemeral item (Item.Ephemeral: presence, for a
// subscription opened with OpenParams.Ephemeral) may come between any two,
// without a seq. When the subscription ends (after every event queued
// before) it returns ErrDeleted, or a ResumeAfter copy of ErrFellBehind,
// ErrEventsCompacted or ErrClosed; and ctx's error.
func (s *Subscription[T]) Next(ctx context.Context) (*Item[T], error) {
	for {
		item, ok, err := s.TryNext(ctx)
		if err != nil || ok {
			return item, err
		}
		select {
		case <-s.signal:
		case <-s.endCh:
			// Ended: what was queued before still comes first.
			if item, ok, err := s.TryNext(ctx); err != nil || ok {
				return item, err
			}
			return nil, s.endError()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TryNext is Next without the wait: it reports false when no event is
// ready yet (or the subscription ended with nothing left; Next then says
// why). A stream uses it to write every event that is ready before it
// flushes once.
func (s *Subscription[T]) TryNext(ctx context.Context) (*Item[T], bool, error) {
	if s.ephemeral {
		// Only a subscription that asked can hold one: the others pay
		// nothing for the slot.
		if item := s.takeEphemeral(); item != nil {
			return item, true, nil
		}
	}
	for {
		if len(s.pending) > 0 {
			item := s.pending[0]
			if item.Event.Seq > s.cursor && s.endsBefore(item) {
				return nil, false, s.endError()
			}
			s.pending = s.pending[1:]
			if item.Event.Seq <= s.cursor {
				continue
			}
			s.cursor = item.Event.Seq
			took(item.Event)
			return item, true, nil
		}
		s.pending = nil // let a drained fill be freed
		item, ok := s.take()
		if !ok {
			return nil, false, nil
		}
		switch seq := item.Event.Seq; {
		case seq <= s.cursor:
			continue // the snapshot or the catch-up read already had it
		case seq > s.cursor+1:
			// A gap: this subscription started behind the hub. Read the
			// missing events from the log, then go on in order.
			fill, err := s.hub.opts.Store.EventsAfter(ctx, s.conversationID, s.cursor, int(seq-s.cursor-1))
			if err != nil {
				// The item goes back first in the queue: the next call
				// (a stream whose keep-alive deadline cut the read
				// short calls again) fills the gap again and returns
				// it, rather than only once another event comes.
				s.putBack(item)
				return nil, false, fmt.Errorf("read events %d to %d: %w", s.cursor+1, seq-1, err)
			}
			if !held(fill, s.cursor, seq-1) {
				s.hub.mu.Lock()
				s.endLocked(ErrEventsCompacted)
				s.hub.mu.Unlock()
				return nil, false, s.endError()
			}
			s.pending = append(s.hub.items(fill), item)
			continue
		}
		if s.endsBefore(item) {
			// Kept, so that TryNext ends again at the same place.
			s.pending = []*Item[T]{item}
			return nil, false, s.endError()
		}
		s.cursor = item.Event.Seq
		took(item.Event)
		return item, true, nil
	}
}

// took tells the first-delta timing (package firstdelta) that a stream
// took e to write it.
func took(e conversation.Event) {
	if firstdelta.On() {
		firstdelta.StreamTook(e, time.Now())
	}
}

// endsBefore reports whether the subscription must end before item, and
// ends it then: a branchSwitched for a client that did not ask for it
// (OpenParams.Branches); the memberRemoved of its user and the
// shareRevoked of its share, which the hub's fan-out ends it at but which
// a resume's or a gap's read of the log may bring instead (a removal or a
// revocation committed while it opened). The cursor stays before it, so
// the client's resume reads a snapshot.
func (s *Subscription[T]) endsBefore(item *Item[T]) bool {
	var err *conversation.Error
	switch item.Event.Kind {
	case conversation.EventBranchSwitched:
		if s.branches {
			return false
		}
		err = ErrPathChanged
	case conversation.EventMemberRemoved:
		if user, ok := s.hub.removedUser(item.Event); !ok || user != s.userID {
			return false
		}
		err = ErrRemoved
	case conversation.EventShareRevoked:
		if share, ok := s.hub.revokedShare(item.Event); !ok || s.shareID == uuid.Nil || share != s.shareID {
			return false
		}
		err = ErrShareEnded
	default:
		return false
	}
	s.hub.mu.Lock()
	s.endLocked(err)
	s.hub.mu.Unlock()
	return true
}

// take removes the oldest queued item. A drained queue gives its storage
// back unless it is small, so a subscriber that was sent a burst does not
// keep the burst's array while idle.
func (s *Subscription[T]) take() (*Item[T], bool) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.head == len(s.queue) {
		return nil, false
	}
	item := s.queue[s.head]
	s.queue[s.head] = nil
	s.head++
	if s.head == len(s.queue) {
		s.head = 0
		if cap(s.queue) > keptQueueCap {
			s.queue = nil
		} else {
			s.queue = s.queue[:0]
		}
	}
	return item, true
}

// putBack returns item, just taken, to the front of the queue.
func (s *Subscription[T]) putBack(item *Item[T]) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.head > 0 {
		s.head--
		s.queue[s.head] = item
		return
	}
	s.queue = append([]*Item[T]{item}, s.queue...)
}

// keptQueueCap is the largest drained queue array a subscription keeps.
const keptQueueCap = 8

// SetNotify has fn called whenever an event is queued for the subscription
// and when it ends, instead of a reader waiting in Next: a stream that
// holds no goroutine while idle is woken so (see connectapi's parked
// streams). From then on the subscription is read with TryNext and Ended,
// never Next, which is no longer woken by an offer. fn runs under the
// hub's lock: it must not block or call back into the hub. It is called
// once at once when events already wait or the subscription has ended, so
// that none is missed.
func (s *Subscription[T]) SetNotify(fn func()) {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.notify = fn
	s.qmu.Lock()
	waiting := s.head < len(s.queue) || s.eph != nil
	s.qmu.Unlock()
	if waiting || s.ended != nil {
		fn()
	}
}

// Ended returns the error the subscription ended with (as Next returns
// it), or nil while it goes on. Events queued before the end may still
// wait: TryNext returns them first.
func (s *Subscription[T]) Ended() error {
	select {
	case <-s.endCh:
		return s.endError()
	default:
		return nil
	}
}

// Cursor is the seq of the last event Next returned (or of the snapshot).
func (s *Subscription[T]) Cursor() int64 { return s.cursor }

// Close unregisters the subscription; its memory is freed at once.
func (s *Subscription[T]) Close() { s.hub.unregister(s) }

// offerLocked queues item without blocking and reports whether it did; a
// full queue cuts the subscription off. The caller holds hub.mu.
func (s *Subscription[T]) offerLocked(item *Item[T]) bool {
	if s.ended != nil {
		return false
	}
	s.qmu.Lock()
	if len(s.queue)-s.head >= s.hub.opts.QueueSize {
		s.qmu.Unlock()
		s.hub.metrics.cutOff.Inc()
		s.endLocked(ErrFellBehind)
		return false
	}
	if len(s.queue) == cap(s.queue) && s.head > 0 {
		// Reuse the taken front instead of growing: a subscriber that is
		// always a little behind never drains, and must not grow forever.
		n := copy(s.queue, s.queue[s.head:])
		clear(s.queue[n:])
		s.queue, s.head = s.queue[:n], 0
	}
	s.queue = append(s.queue, item)
	s.qmu.Unlock()
	if s.notify != nil {
		s.notify()
		return true
	}
	select {
	case s.signal <- struct{}{}:
	default: // a wake-up is already pending
	}
	return true
}

// endLocked ends the subscription with err and removes it from its topic.
// The caller holds hub.mu.
func (s *Subscription[T]) endLocked(err *conversation.Error) {
	if s.ended != nil {
		return
	}
	s.ended = err
	close(s.endCh)
	if s.notify != nil {
		s.notify()
	}
	if t := s.hub.topics[s.conversationID]; t != nil {
		delete(t.subs, s)
		if len(t.subs) == 0 {
			delete(s.hub.topics, s.conversationID)
			delete(s.hub.dirty, s.conversationID)
		}
	}
}

// endError is the error Next returns once the subscription has ended:
// a resumable end carries the seq to resume after.
func (s *Subscription[T]) endError() error {
	if s.ended.Resumable {
		return s.ended.ResumeAfter(s.cursor)
	}
	return s.ended
}

// items wraps events for delivery, decoding each.
func (h *Hub[T]) items(events []conversation.Event) []*Item[T] {
	out := make([]*Item[T], len(events))
	for i, e := range events {
		item := &Item[T]{Event: e}
		if h.opts.Decode != nil {
			item.Payload, item.Err = h.opts.Decode(e)
		}
		out[i] = item
	}
	return out
}
