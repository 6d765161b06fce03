package stream

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

// TestEphemeral checks the ephemeral slot: only subscriptions that asked
// get an item, a subscriber that does not read holds only the latest one
// and is never cut off for them, the item comes before queued events
// without moving the cursor, and Close runs the OnClose functions once.
func TestEphemeral(t *testing.T) {
	t.Parallel()
	h := NewHub(HubOptions[int]{QueueSize: 4})
	id := uuid.New()
	sub := func(ephemeral bool) *Subscription[int] {
		s := &Subscription[int]{hub: h, conversationID: id, signal: make(chan struct{}, 1), endCh: make(chan struct{}),
			ephemeral: ephemeral, release: func() {}}
		if err := h.register(s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	asking, plain := sub(true), sub(false)
	for i := 1; i <= 1000; i++ {
		h.Ephemeral(id, i)
	}
	h.Ephemeral(uuid.New(), -1) // a conversation nobody follows: nothing
	if asking.Ended() != nil {
		t.Fatalf("1000 ephemeral items cut the subscriber off: %v", asking.Ended())
	}
	h.mu.Lock()
	asking.offerLocked(&Item[int]{Event: conversation.Event{ConversationID: id, Seq: 1}, Payload: 7})
	h.mu.Unlock()
	ctx := context.Background()
	item, ok, err := asking.TryNext(ctx)
	if err != nil || !ok || !item.Ephemeral || item.Payload != 1000 {
		t.Fatalf("TryNext = %+v, %v, %v; want the latest ephemeral item, 1000", item, ok, err)
	}
	if asking.Cursor() != 0 {
		t.Fatalf("an ephemeral item moved the cursor to %d", asking.Cursor())
	}
	item, ok, err = asking.TryNext(ctx)
	if err != nil || !ok || item.Ephemeral || item.Event.Seq != 1 {
		t.Fatalf("TryNext = %+v, %v, %v; want the event of seq 1", item, ok, err)
	}
	if _, ok, _ := asking.TryNext(ctx); ok {
		t.Fatal("an item after the only ones offered")
	}
	if _, ok, _ := plain.TryNext(ctx); ok {
		t.Fatal("a subscription that did not ask got an ephemeral item")
	}

	closed := 0
	asking.OnClose(func() { closed++ })
	asking.Close()
	asking.Close()
	if closed != 1 {
		t.Fatalf("OnClose ran %d times, want 1", closed)
	}
}
