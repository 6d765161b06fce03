package stream

import (
	"time"

	"github.com/convo-dev/convo/conversation"
)

// Deliver fans out events that a feed received whole (the logical
// replication feed reads the event rows from the WAL), without reading the
// log. events must be in commit order, which is seq order per conversation.
//
// An event of a followed conversation is fanned out when it is the next one
// the hub has not delivered, skipped when it was delivered already (by a
// read of the log, or a repeat after a reconnect), and when it comes after
// one the hub has not seen, the conversation is marked to be read from the
// log instead, which fills the gap. Events of conversations nobody follows
// here are dropped. Deliver never blocks on subscribers.
func (h *Hub[T]) Deliver(events []conversation.Event) {
	// Decode only what some subscriber may need, outside the lock (the WAL
	// carries every conversation of the database; most are followed
	// elsewhere or not at all).
	h.mu.Lock()
	var wanted []conversation.Event
	for _, e := range events {
		if t, ok := h.topics[e.ConversationID]; ok && t.delivered >= 0 && e.Seq > t.delivered {
			wanted = append(wanted, e)
		}
	}
	h.mu.Unlock()
	if len(wanted) == 0 {
		return
	}
	items := h.items(wanted)

	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, item := range items {
		e := item.Event
		t, ok := h.topics[e.ConversationID]
		switch {
		case !ok || t.delivered < 0 || e.Seq <= t.delivered:
			// Unfollowed meanwhile, not started (its start reads the
			// log), or delivered meanwhile.
			continue
		case e.Seq > t.delivered+1:
			h.markDirtyLocked(e.ConversationID)
			continue
		}
		t.delivered = e.Seq
		h.fanOutLocked(t, item, now)
	}
}
