package stream

import (
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

func TestDeliver(t *testing.T) {
	t.Parallel()
	decoded := 0
	h := NewHub(HubOptions[int64]{Decode: func(e conversation.Event) (int64, error) { decoded++; return e.Seq, nil }})
	followed, unstarted, other := uuid.New(), uuid.New(), uuid.New()
	subscribe := func(id uuid.UUID) *Subscription[int64] {
		s := &Subscription[int64]{hub: h, conversationID: id, signal: make(chan struct{}, 1), endCh: make(chan struct{})}
		if err := h.register(s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := subscribe(followed)
	h.start(s, 5)
	waiting := subscribe(unstarted)
	clear(h.dirty)

	events := func(id uuid.UUID, seqs ...int64) []conversation.Event {
		var out []conversation.Event
		for _, seq := range seqs {
			out = append(out, conversation.Event{ConversationID: id, Seq: seq})
		}
		return out
	}
	queued := func(s *Subscription[int64]) []int64 {
		var seqs []int64
		for item, ok := s.take(); ok; item, ok = s.take() {
			seqs = append(seqs, item.Payload)
		}
		return seqs
	}

	// The next events go out; repeats and other conversations do not.
	h.Deliver(append(append(events(followed, 4, 5, 6, 7), events(other, 1)...), events(unstarted, 1)...))
	if got := queued(s); len(got) != 2 || got[0] != 6 || got[1] != 7 {
		t.Fatalf("queued %v, want [6 7]", got)
	}
	if decoded != 2 {
		t.Errorf("decoded %d events, want only the 2 a subscriber needs", decoded)
	}
	if got := queued(waiting); len(got) != 0 {
		t.Errorf("a subscription that has not started got %v", got)
	}
	h.Deliver(events(followed, 7))
	if got := queued(s); len(got) != 0 {
		t.Errorf("a repeat was queued: %v", got)
	}
	// A gap: the hub reads the log instead.
	h.Deliver(events(followed, 9, 10))
	if got := queued(s); len(got) != 0 {
		t.Errorf("events after a gap were queued: %v", got)
	}
	if _, ok := h.dirty[followed]; !ok {
		t.Errorf("dirty = %v; want the conversation marked to be read", h.dirty)
	}
	if _, ok := h.dirty[other]; ok {
		t.Error("an unfollowed conversation was marked")
	}
}
