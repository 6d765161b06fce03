package stream

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

// TestSubscriptionQueue checks a subscription's queue: storage only while
// events wait, bounded growth for a reader that is always a little behind,
// TryNext that never waits, and a cut-off at QueueSize that still hands
// over everything queued before it.
func TestSubscriptionQueue(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T, queueSize int) (*Hub[struct{}], *Subscription[struct{}], func(seq int64) bool) {
		t.Helper()
		h := NewHub(HubOptions[struct{}]{QueueSize: queueSize})
		id := uuid.New()
		s := &Subscription[struct{}]{hub: h, conversationID: id, signal: make(chan struct{}, 1), endCh: make(chan struct{})}
		if err := h.register(s); err != nil {
			t.Fatal(err)
		}
		offer := func(seq int64) bool {
			h.mu.Lock()
			defer h.mu.Unlock()
			return s.offerLocked(&Item[struct{}]{Event: conversation.Event{ConversationID: id, Seq: seq}})
		}
		return h, s, offer
	}
	ctx := context.Background()

	t.Run("IdleHoldsNoQueue", func(t *testing.T) {
		t.Parallel()
		_, s, offer := setup(t, 512)
		if cap(s.queue) != 0 {
			t.Fatalf("a new subscription has a queue of %d", cap(s.queue))
		}
		for seq := int64(1); seq <= 100; seq++ {
			offer(seq)
		}
		for seq := int64(1); seq <= 100; seq++ {
			item, err := s.Next(ctx)
			if err != nil || item.Event.Seq != seq {
				t.Fatalf("Next = %v, %v; want seq %d", item, err, seq)
			}
		}
		if cap(s.queue) != 0 {
			t.Errorf("a drained subscription keeps a queue of %d after a burst", cap(s.queue))
		}
	})

	t.Run("AlwaysBehindStaysBounded", func(t *testing.T) {
		t.Parallel()
		_, s, offer := setup(t, 512)
		seq := int64(0)
		next := int64(1)
		for range 10_000 {
			seq++
			offer(seq)
			seq++
			offer(seq)
			for range 2 {
				item, ok, err := s.TryNext(ctx)
				if err != nil || !ok || item.Event.Seq != next {
					t.Fatalf("TryNext = %v, %v, %v; want seq %d", item, ok, err, next)
				}
				next++
			}
			seq++
			offer(seq) // one left behind each round, taken at the next
			item, ok, err := s.TryNext(ctx)
			if err != nil || !ok || item.Event.Seq != next {
				t.Fatalf("TryNext = %v, %v, %v; want seq %d", item, ok, err, next)
			}
			next++
		}
		if cap(s.queue) > 2*keptQueueCap {
			t.Errorf("queue grew to %d for a reader never more than 2 behind", cap(s.queue))
		}
	})

	t.Run("TryNextDoesNotWait", func(t *testing.T) {
		t.Parallel()
		_, s, offer := setup(t, 512)
		if item, ok, err := s.TryNext(ctx); ok || err != nil {
			t.Fatalf("TryNext on an empty queue = %v, %v, %v", item, ok, err)
		}
		offer(1)
		if item, ok, err := s.TryNext(ctx); !ok || err != nil || item.Event.Seq != 1 {
			t.Fatalf("TryNext = %v, %v, %v; want seq 1", item, ok, err)
		}
		// Repeats of what was returned are skipped.
		offer(1)
		if item, ok, err := s.TryNext(ctx); ok || err != nil {
			t.Fatalf("TryNext after a repeat = %v, %v, %v", item, ok, err)
		}
	})

	t.Run("OverflowCutsOffAfterQueued", func(t *testing.T) {
		t.Parallel()
		_, s, offer := setup(t, 4)
		for seq := int64(1); seq <= 4; seq++ {
			if !offer(seq) {
				t.Fatalf("offer %d refused below the queue size", seq)
			}
		}
		if offer(5) {
			t.Fatal("offer past the queue size accepted")
		}
		for seq := int64(1); seq <= 4; seq++ {
			item, err := s.Next(ctx)
			if err != nil || item.Event.Seq != seq {
				t.Fatalf("Next = %v, %v; want queued seq %d first", item, err, seq)
			}
		}
		if _, err := s.Next(ctx); !errors.Is(err, ErrFellBehind) {
			t.Fatalf("Next after the queued events = %v, want ErrFellBehind", err)
		}
	})
}

// TestItemMemo checks that concurrent first callers of an item's Memo all
// get one memo, and that a later caller gets it without making another.
func TestItemMemo(t *testing.T) {
	var item Item[int]
	var made atomic.Int32
	var wg sync.WaitGroup
	got := make([]any, 8)
	for i := range got {
		wg.Go(func() {
			got[i] = item.Memo(func() any { made.Add(1); return new(int) })
		})
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("caller %d got %p, caller 0 %p: want one memo", i, got[i], got[0])
		}
	}
	before := made.Load()
	if again := item.Memo(func() any { made.Add(1); return new(int) }); again != got[0] {
		t.Errorf("a later call got %p, want %p", again, got[0])
	}
	if made.Load() != before {
		t.Error("a later call made a memo")
	}
}

// gapStore answers a gap's fill from events, or with the context's error
// as the database would once the context is done.
type gapStore struct {
	Store
	events []conversation.Event
}

func (g gapStore) EventsAfter(ctx context.Context, _ uuid.UUID, after int64, limit int) ([]conversation.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []conversation.Event
	for _, e := range g.events {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

// TestGapFillCutShortKeepsTheEvent: a subscription offered seq 4 after
// seq 1 reads 2 and 3 from the log first; when that read fails (here its
// context is done, as a stream's keep-alive deadline cuts a wait short),
// the next call fills the gap again and returns 2, 3 and 4, with no
// further event needed to bring 4 back.
func TestGapFillCutShortKeepsTheEvent(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	var events []conversation.Event
	for seq := int64(1); seq <= 4; seq++ {
		events = append(events, conversation.Event{ConversationID: id, Seq: seq})
	}
	h := NewHub(HubOptions[struct{}]{Store: gapStore{events: events}})
	s := &Subscription[struct{}]{hub: h, conversationID: id, signal: make(chan struct{}, 1), endCh: make(chan struct{}), cursor: 1}
	if err := h.register(s); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	s.offerLocked(&Item[struct{}]{Event: events[3]})
	h.mu.Unlock()

	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok, err := s.TryNext(done); ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("TryNext with its context done = %v, %v; want the read's error", ok, err)
	}
	for want := int64(2); want <= 4; want++ {
		item, ok, err := s.TryNext(context.Background())
		if err != nil || !ok || item.Event.Seq != want {
			t.Fatalf("TryNext = %v, %v, %v; want seq %d", item, ok, err, want)
		}
	}
	if _, ok, err := s.TryNext(context.Background()); ok || err != nil {
		t.Fatalf("TryNext after 4 = %v, %v; want nothing ready", ok, err)
	}
}

// TestEndsAtItsRemovalOrRevocationReadFromTheLog: the hub's fan-out ends
// a removed user's and a revoked share's subscriptions at the event, but
// a resume's or a gap's read of the log hands the event to the
// subscription itself (a removal or a revocation committed while it
// opened): it ends there too, with ErrRemoved or ErrShareEnded, after the
// events before it; another user's removal, another share's revocation
// are delivered.
func TestEndsAtItsRemovalOrRevocationReadFromTheLog(t *testing.T) {
	t.Parallel()
	share := uuid.New()
	for _, tc := range []struct {
		name      string
		kind      conversation.EventKind
		mine, not string
		want      *conversation.Error
	}{
		{"removed", conversation.EventMemberRemoved, `{"userId": "bob"}`, `{"userId": "carol"}`, ErrRemoved},
		{"revoked", conversation.EventShareRevoked, `{"shareId": "` + share.String() + `"}`, `{"shareId": "` + uuid.NewString() + `"}`, ErrShareEnded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := NewHub(HubOptions[struct{}]{})
			id := uuid.New()
			s := &Subscription[struct{}]{hub: h, conversationID: id, userID: "bob", shareID: share,
				signal: make(chan struct{}, 1), endCh: make(chan struct{})}
			if err := h.register(s); err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			for seq, payload := range []string{tc.not, tc.mine} {
				s.offerLocked(&Item[struct{}]{Event: conversation.Event{ConversationID: id, Seq: int64(seq + 1), Kind: tc.kind, Payload: []byte(payload)}})
			}
			h.mu.Unlock()
			ctx := context.Background()
			if item, ok, err := s.TryNext(ctx); err != nil || !ok || item.Event.Seq != 1 {
				t.Fatalf("TryNext = %v, %v, %v; want the other one's event, seq 1", item, ok, err)
			}
			if _, ok, err := s.TryNext(ctx); ok || !errors.Is(err, tc.want) {
				t.Fatalf("TryNext at its own event = %v, %v; want %v", ok, err, tc.want)
			}
		})
	}
}
