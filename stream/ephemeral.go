package stream

import (
	"github.com/google/uuid"
)

// Ephemeral messages.
//
// Some of what a stream carries is not an event: presence (who is viewing
// a conversation, who is typing) is never stored, has no seq and is never
// replayed. Only its latest value matters, so a subscription holds at most
// one waiting ephemeral item in a slot of its own beside its queue: a newer
// one replaces it, and it never counts against the queue, so a slow
// subscriber neither falls behind nor slows anyone for it. TryNext returns
// the slot's item before the queued events, without moving the cursor.

// Ephemeral offers payload to every subscriber of the conversation that
// opened with OpenParams.Ephemeral, as one item shared by all (its Memo
// too), replacing the one each may still hold. It never blocks; a
// conversation nobody follows here is skipped.
func (h *Hub[T]) Ephemeral(id uuid.UUID, payload T) {
	item := &Item[T]{Payload: payload, Ephemeral: true}
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.topics[id]
	if !ok {
		return
	}
	for s := range t.subs {
		if s.ephemeral {
			s.offerEphemeralLocked(item)
		}
	}
}

// Follows reports whether some subscription of this hub follows the
// conversation.
func (h *Hub[T]) Follows(id uuid.UUID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.topics[id]
	return ok
}

// SetEphemeral offers payload to this subscription alone (for example the
// current presence right after its start), as Hub.Ephemeral does.
func (s *Subscription[T]) SetEphemeral(payload T) {
	item := &Item[T]{Payload: payload, Ephemeral: true}
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.offerEphemeralLocked(item)
}

// offerEphemeralLocked puts item in the slot and wakes the reader, as
// offerLocked does. The caller holds hub.mu.
func (s *Subscription[T]) offerEphemeralLocked(item *Item[T]) {
	if s.ended != nil {
		return
	}
	s.qmu.Lock()
	s.eph = item
	s.qmu.Unlock()
	if s.notify != nil {
		s.notify()
		return
	}
	select {
	case s.signal <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// takeEphemeral empties the slot.
func (s *Subscription[T]) takeEphemeral() *Item[T] {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	item := s.eph
	s.eph = nil
	return item
}

// OnClose has fn called once when the subscription is closed (Close),
// outside the hub's lock: a stream that counts its client as present
// removes it there, however the stream ended (parked or not).
func (s *Subscription[T]) OnClose(fn func()) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	s.onClose = append(s.onClose, fn)
}

// runOnClose runs the OnClose functions once.
func (s *Subscription[T]) runOnClose() {
	s.qmu.Lock()
	fns := s.onClose
	s.onClose = nil
	s.qmu.Unlock()
	for _, fn := range fns {
		fn()
	}
}
