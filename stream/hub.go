package stream

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/backoff"
	"github.com/convo-dev/convo/internal/firstdelta"
	"github.com/convo-dev/convo/limit"
)

// Store is what the hub reads: the conversations and their event log.
type Store interface {
	// RecentState is a conversation as of its last seq with its latest
	// messages that fit in maxBytes (a subscription's snapshot: see
	// conversation.Store); Conversation its row (LastSeq).
	RecentState(ctx context.Context, ownerID string, id uuid.UUID, maxBytes int) (conversation.State, error)
	Conversation(ctx context.Context, ownerID string, id uuid.UUID) (conversation.Conversation, error)
	// EventsAfter and EventsAfterMany read the log after a seq, in seq
	// order, at most limit events per conversation.
	EventsAfter(ctx context.Context, id uuid.UUID, afterSeq int64, limit int) ([]conversation.Event, error)
	EventsAfterMany(ctx context.Context, cursors []conversation.Cursor, limit int) ([]conversation.Event, error)
	// ExistingConversations returns which of ids exist.
	ExistingConversations(ctx context.Context, ids []uuid.UUID) ([]uuid.UUID, error)
}

// SnapshotStore reads subscriptions' snapshots: a conversation as of its
// last seq with its latest messages that fit in maxBytes, as
// Store.RecentState, with its errors. postgres.SnapshotReader is one that
// reads many at once on connections of its own.
type SnapshotStore interface {
	RecentState(ctx context.Context, ownerID string, id uuid.UUID, maxBytes int) (conversation.State, error)
}

// Item is one event as the hub delivers it: shared, read-only, by every
// subscriber of its conversation. T is the hub's payload type.
type Item[T any] struct {
	Event conversation.Event
	// Payload is what HubOptions.Decode made of the event, once for all
	// subscribers (for example the wire message to send).
	Payload T
	// Err is Decode's error, if any.
	Err error
	// Ephemeral marks an item that is not an event (Hub.Ephemeral): Event
	// is zero, the payload is all there is.
	Ephemeral bool

	memo atomic.Value // see Memo
}

// Memo returns what makeMemo derives from the item, made once and then
// shared by every subscriber: an adapter's encoding of the payload, say,
// found once per event rather than once per delivery. (Callers racing to
// be first may each make one; all get the one stored first.) An item holds
// one memo, so every caller must pass an equivalent makeMemo returning one
// concrete type.
func (it *Item[T]) Memo(makeMemo func() any) any {
	if v := it.memo.Load(); v != nil {
		return v
	}
	v := makeMemo()
	if it.memo.CompareAndSwap(nil, v) {
		return v
	}
	return it.memo.Load()
}

// HubOptions configures a Hub whose payload is T.
type HubOptions[T any] struct {
	// Store is what subscriptions read: snapshots, resumes, gaps.
	Store Store
	// LiveStore, when set, is what the hub's own loop reads the live
	// events from, on connections the subscriptions' reads never hold:
	// a burst of subscribers (or of RPCs sharing Store's pool) then never
	// delays the events of everyone else. Nil: Store.
	LiveStore Store
	// Snapshots, when set, is what subscriptions read their snapshots
	// from (a postgres.SnapshotReader, which reads the snapshots asked
	// for at about the same time together, in one transaction, on
	// connections of its own). Nil: Store.
	Snapshots SnapshotStore
	Logger    *slog.Logger
	// Decode runs once per event before fan-out and makes its payload;
	// nil leaves the payload zero.
	Decode func(conversation.Event) (T, error)
	// QueueSize is each subscriber's queue length (default 512 events).
	QueueSize int
	// ReadBatch bounds the events read per conversation per query; a
	// conversation with more is read again at once. It defaults to a
	// quarter of QueueSize (at most 500): one read is fanned out at once,
	// so a batch near the queue's size would cut off subscribers that are
	// merely a little behind.
	ReadBatch int
	// SnapshotBytes bounds a snapshot: it holds the latest messages whose
	// size adds up to at most this (always the newest, and every message
	// still being written), and says when older ones were left out
	// (State.Older). Default DefaultSnapshotBytes.
	SnapshotBytes int
	// Streams, when set, bounds the open subscriptions per owner and in
	// total: Open past a bound fails with its ResourceExhausted error, and
	// Close gives the subscription's place back. Every protocol opens its
	// streams here, so the bounds count them all together.
	Streams *limit.Streams
}

// DefaultSnapshotBytes is HubOptions.SnapshotBytes's default: a snapshot
// of 256 KiB of messages, which a stream holds in memory (about twice
// over, decoded and encoded) until it is written.
const DefaultSnapshotBytes = 256 << 10

// Hub fans out conversations' events to subscribers, each event decoded
// once into a payload of type T for all of them. Its zero value is not
// usable; call NewHub, then Run.
type Hub[T any] struct {
	opts   HubOptions[T]
	logger *slog.Logger

	mu     sync.Mutex
	topics map[uuid.UUID]*topic[T]
	// dirty holds the conversations to read at the next wake-up.
	dirty  map[uuid.UUID]struct{}
	closed *conversation.Error
	// opened counts the subscriptions registered (Opened).
	opened int64
	// recheck asks the next read to look for deleted conversations: a
	// deletion is only a notification, lost when the feed was away.
	recheck bool

	wake chan struct{}
	done chan struct{}

	metrics hubMetrics
}

// topic is one followed conversation.
type topic[T any] struct {
	id uuid.UUID
	// delivered is the last seq fanned out; -1 until a subscriber has
	// told where it starts.
	delivered int64
	subs      map[*Subscription[T]]struct{}
}

// NewHub returns a hub reading from opts.Store.
func NewHub[T any](opts HubOptions[T]) *Hub[T] {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LiveStore == nil {
		opts.LiveStore = opts.Store
	}
	if opts.Snapshots == nil {
		opts.Snapshots = opts.Store
	}
	if opts.SnapshotBytes <= 0 {
		opts.SnapshotBytes = DefaultSnapshotBytes
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 512
	}
	if opts.ReadBatch <= 0 {
		opts.ReadBatch = min(500, max(1, opts.QueueSize/4))
	}
	return &Hub[T]{
		opts: opts, logger: opts.Logger,
		topics: make(map[uuid.UUID]*topic[T]),
		dirty:  make(map[uuid.UUID]struct{}),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),

		metrics: newHubMetrics(),
	}
}

// Sink is what a Feed drives: a Hub of any payload.
type Sink interface {
	Hint(id uuid.UUID, seq int64)
	Deleted(id uuid.UUID)
	Resync()
	Deliver(events []conversation.Event)
}

var _ Sink = (*Hub[any])(nil)

// Run reads and fans out events until ctx ends, then ends every
// subscription with ErrClosed.
func (h *Hub[T]) Run(ctx context.Context) {
	defer close(h.done)
	bo := backoff.New(50*time.Millisecond, 5*time.Second)
	for {
		select {
		case <-ctx.Done():
			h.shutdown(ErrClosed)
			return
		case <-h.wake:
		}
		for {
			more, err := h.readOnce(ctx)
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				delay := bo.Next()
				h.logger.Warn("stream: reading the event log failed; retrying", "err", err, "retry_in", delay)
				select {
				case <-ctx.Done():
				case <-time.After(delay):
				}
				continue
			}
			bo.Reset()
			if !more {
				break
			}
		}
	}
}

// Drain refuses new subscriptions with ErrClosed; the open ones go on
// until Run ends. A server that is shutting down drains its hub first, so
// that clients go to another server while this one still delivers.
func (h *Hub[T]) Drain() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed == nil {
		h.closed = ErrClosed
	}
}

// Done is closed when Run has returned.
func (h *Hub[T]) Done() <-chan struct{} { return h.done }

// Hint tells the hub that the conversation has an event with seq (0:
// unknown). It never blocks.
func (h *Hub[T]) Hint(id uuid.UUID, seq int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.topics[id]
	if !ok || (seq > 0 && t.delivered >= 0 && seq <= t.delivered) {
		return
	}
	if firstdelta.On() {
		firstdelta.Hinted(id, seq, time.Now())
	}
	h.markDirtyLocked(id)
}

// Deleted ends every subscription of a deleted conversation with
// ErrDeleted.
func (h *Hub[T]) Deleted(id uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t, ok := h.topics[id]; ok {
		for s := range t.subs {
			s.endLocked(ErrDeleted)
		}
		delete(h.topics, id)
		delete(h.dirty, id)
	}
}

// Resync marks every followed conversation to be read again: a feed calls
// it after each (re)connect, since notifications sent while it was away
// are lost.
func (h *Hub[T]) Resync() {
	h.metrics.resyncs.Inc()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recheck = true
	for id, t := range h.topics {
		if t.delivered >= 0 {
			h.markDirtyLocked(id)
		}
	}
}

// Stats reports the hub's size, for metrics and tests.
type Stats struct{ Topics, Subscribers int }

// Opened returns how many subscriptions were registered since the hub
// started, those that have ended included.
func (h *Hub[T]) Opened() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.opened
}

// Stats returns the current number of followed conversations and
// subscriptions.
func (h *Hub[T]) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := Stats{Topics: len(h.topics)}
	for _, t := range h.topics {
		st.Subscribers += len(t.subs)
	}
	return st
}

// markDirtyLocked schedules a read of the conversation's log and wakes the
// reader. The caller holds h.mu.
func (h *Hub[T]) markDirtyLocked(id uuid.UUID) {
	h.dirty[id] = struct{}{}
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// readOnce reads every dirty topic after its delivered seq in one query and
// fans the events out. It reports whether a topic hit the batch limit and
// must be read again.
func (h *Hub[T]) readOnce(ctx context.Context) (bool, error) {
	h.mu.Lock()
	var cursors []conversation.Cursor
	for id := range h.dirty {
		t, ok := h.topics[id]
		if !ok || t.delivered < 0 {
			delete(h.dirty, id)
			continue
		}
		cursors = append(cursors, conversation.Cursor{ConversationID: id, AfterSeq: t.delivered})
	}
	clear(h.dirty)
	recheck := h.recheck
	h.recheck = false
	h.mu.Unlock()
	if len(cursors) == 0 {
		return false, nil
	}
	if recheck {
		if err := h.endDeleted(ctx, cursors); err != nil {
			h.mu.Lock()
			h.recheck = true
			for _, c := range cursors {
				h.markDirtyLocked(c.ConversationID)
			}
			h.mu.Unlock()
			return false, err
		}
	}

	h.metrics.reads.Inc()
	events, err := h.opts.LiveStore.EventsAfterMany(ctx, cursors, h.opts.ReadBatch)
	if err != nil {
		h.mu.Lock()
		for _, c := range cursors {
			h.markDirtyLocked(c.ConversationID)
		}
		h.mu.Unlock()
		return false, err
	}
	return h.publish(events), nil
}

// endDeleted ends the subscriptions of the conversations among cursors
// that no longer exist.
func (h *Hub[T]) endDeleted(ctx context.Context, cursors []conversation.Cursor) error {
	ids := make([]uuid.UUID, len(cursors))
	for i, c := range cursors {
		ids[i] = c.ConversationID
	}
	existing, err := h.opts.LiveStore.ExistingConversations(ctx, ids)
	if err != nil {
		return err
	}
	found := make(map[uuid.UUID]bool, len(existing))
	for _, id := range existing {
		found[id] = true
	}
	for _, id := range ids {
		if !found[id] {
			h.Deleted(id)
		}
	}
	return nil
}

// publish decodes events (grouped by conversation, in seq order) and fans
// them out. It reports whether some conversation may have more to read.
func (h *Hub[T]) publish(events []conversation.Event) bool {
	items := h.items(events)
	perConversation := make(map[uuid.UUID]int)
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, item := range items {
		e := item.Event
		perConversation[e.ConversationID]++
		t, ok := h.topics[e.ConversationID]
		if !ok || t.delivered < 0 || e.Seq <= t.delivered {
			// Unfollowed meanwhile (and perhaps followed again, not yet
			// started), or already delivered by another read.
			continue
		}
		// The log is read from delivered+1, so a higher seq means the
		// events between were compacted away: subscribers see the gap and
		// end with ErrEventsCompacted (Subscription.Next).
		t.delivered = e.Seq
		h.fanOutLocked(t, item, now)
	}
	more := false
	for id, n := range perConversation {
		if n >= h.opts.ReadBatch {
			h.markDirtyLocked(id)
			more = true
		}
	}
	return more
}

// endRemovedLocked ends, with ErrRemoved, the subscriptions of t whose
// user a memberRemoved event e removed: every server's hub reads the
// event from the log, so the user's streams end on every server, at the
// event, before it would be delivered. Events queued before it are still
// delivered (the user could see them). The caller holds h.mu.
func (h *Hub[T]) endRemovedLocked(t *topic[T], e conversation.Event) {
	user, ok := h.removedUser(e)
	if !ok {
		return
	}
	for s := range t.subs {
		if s.userID == user {
			s.endLocked(ErrRemoved)
		}
	}
}

// endSharedLocked ends, with ErrShareEnded, the subscriptions of t opened
// for the share a shareRevoked event e revoked: every server's hub reads
// the event from the log, so the share's streams end on every server at
// once. The caller holds h.mu.
func (h *Hub[T]) endSharedLocked(t *topic[T], e conversation.Event) {
	share, ok := h.revokedShare(e)
	if !ok {
		return
	}
	for s := range t.subs {
		if s.shareID == share {
			s.endLocked(ErrShareEnded)
		}
	}
}

// removedUser is the user a memberRemoved event e removed.
func (h *Hub[T]) removedUser(e conversation.Event) (string, bool) {
	var p struct {
		UserID string `json:"userId"`
	}
	if err := json.Unmarshal(e.Payload, &p); err != nil || p.UserID == "" {
		h.logger.Error("stream: a memberRemoved event names no user", "conversation", e.ConversationID, "seq", e.Seq, "err", err)
		return "", false
	}
	return p.UserID, true
}

// revokedShare is the share a shareRevoked event e revoked.
func (h *Hub[T]) revokedShare(e conversation.Event) (uuid.UUID, bool) {
	var p struct {
		ShareID uuid.UUID `json:"shareId"`
	}
	if err := json.Unmarshal(e.Payload, &p); err != nil || p.ShareID == uuid.Nil {
		h.logger.Error("stream: a shareRevoked event names no share", "conversation", e.ConversationID, "seq", e.Seq, "err", err)
		return uuid.Nil, false
	}
	return p.ShareID, true
}

// fanOutLocked queues item to every subscriber of t (a memberRemoved to
// every one but the removed user's, which it ends). Every feed's events
// come through here, read from the log or delivered whole. The caller
// holds h.mu.
func (h *Hub[T]) fanOutLocked(t *topic[T], item *Item[T], now time.Time) {
	if item.Event.Kind == conversation.EventMemberRemoved {
		h.endRemovedLocked(t, item.Event)
	}
	if item.Event.Kind == conversation.EventShareRevoked {
		h.endSharedLocked(t, item.Event)
	}
	n := 0
	for s := range t.subs {
		if s.offerLocked(item) {
			n++
		}
	}
	h.metrics.fannedOut(item.Event, n, now)
	if firstdelta.On() {
		firstdelta.HubRead(item.Event, now)
	}
}

func (h *Hub[T]) shutdown(err *conversation.Error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = err
	for id, t := range h.topics {
		for s := range t.subs {
			s.endLocked(err)
		}
		delete(h.topics, id)
	}
}

// register adds a subscription, creating its topic.
func (h *Hub[T]) register(s *Subscription[T]) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed != nil {
		return h.closed
	}
	t, ok := h.topics[s.conversationID]
	if !ok {
		t = &topic[T]{id: s.conversationID, delivered: -1, subs: make(map[*Subscription[T]]struct{})}
		h.topics[s.conversationID] = t
	}
	t.subs[s] = struct{}{}
	h.opened++
	return nil
}

// start tells the hub that s has everything up to seq; a topic that did
// not know where to start reads from there.
func (h *Hub[T]) start(s *Subscription[T], seq int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.topics[s.conversationID]
	if !ok {
		return
	}
	if t.delivered < 0 {
		t.delivered = seq
	}
	// Read at once: a notification may have come while the topic had no
	// start, or the hub may be behind this subscriber's snapshot.
	h.markDirtyLocked(s.conversationID)
}

// unregister removes a subscription, and its topic when it was the last.
func (h *Hub[T]) unregister(s *Subscription[T]) {
	s.release()
	defer s.runOnClose()
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.topics[s.conversationID]
	if !ok {
		return
	}
	delete(t.subs, s)
	if len(t.subs) == 0 {
		delete(h.topics, s.conversationID)
		delete(h.dirty, s.conversationID)
	}
}
