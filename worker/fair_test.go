package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	. "github.com/convo-dev/convo/worker"
)

// timedModel answers at once with one chunk of text, then finishes after
// a fixed time: long for a message that starts with "long", short
// otherwise. It records when each message (the user's last) reached it.
type timedModel struct {
	short, long time.Duration
	mu          sync.Mutex
	started     map[string]time.Time
	changed     chan struct{}
}

func newTimedModel(short, long time.Duration) *timedModel {
	return &timedModel{short: short, long: long, started: map[string]time.Time{}, changed: make(chan struct{}, 1)}
}

func (m *timedModel) Stream(ctx context.Context, req Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		text := req.Messages[len(req.Messages)-1].Text
		m.mu.Lock()
		m.started[text] = time.Now()
		m.mu.Unlock()
		select {
		case m.changed <- struct{}{}:
		default:
		}
		if !yield(Part{Index: 0, Chunk: MessageChunk("On " + text + ": ")}, nil) {
			return
		}
		took := m.short
		if strings.HasPrefix(text, "long") {
			took = m.long
		}
		select {
		case <-time.After(took):
		case <-ctx.Done():
			return
		}
		yield(Finish{Reason: FinishStop}, nil)
	}
}

// waitStart returns when the message text reached the model, failing the
// test after 30 s.
func (m *timedModel) waitStart(t testing.TB, text string) time.Time {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		m.mu.Lock()
		at, ok := m.started[text]
		m.mu.Unlock()
		if ok {
			return at
		}
		select {
		case <-m.changed:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%q never reached the model", text)
		}
	}
}

// sendAs queues text as owner's message in a new conversation.
func (tb *testBundle) sendAs(t testing.TB, owner, text string) sent {
	t.Helper()
	res, err := tb.store.SendMessage(context.Background(), conversation.SendMessageParams{
		OwnerID: owner, Text: text, ModelConfigs: []json.RawMessage{json.RawMessage(`{}`)},
	})
	if err != nil {
		t.Fatalf("send message as %s: %v", owner, err)
	}
	return sent{conversationID: res.ConversationID, promptID: res.PromptIDs[0], messageID: res.AssistantMessageIDs[0]}
}

// TestFairSlots floods the queue with one user's prompts and checks that
// another user's prompt still starts about as soon as when it is alone
// (its baseline): it takes the next slot to free up; with a reserved slot,
// at once; and a user with short replies keeps its share of the slots
// against one with long replies.
func TestFairSlots(t *testing.T) {
	t.Parallel()

	// baseline is how long bob's prompt, alone, takes to reach the model.
	baseline := func(t *testing.T, tb *testBundle, m *timedModel, res *results) time.Duration {
		sentAt := time.Now()
		s := tb.sendAs(t, "bob", "bob alone")
		took := m.waitStart(t, "bob alone").Sub(sentAt)
		res.wait(t, s.promptID, 20*time.Second)
		return took
	}
	// flood queues n of alice's prompts and waits for the first running
	// ones to start.
	flood := func(t *testing.T, tb *testBundle, m *timedModel, prefix string, n, running int) {
		for i := range n {
			tb.sendAs(t, "alice", fmt.Sprintf("%s %d", prefix, i))
		}
		for i := range running {
			m.waitStart(t, fmt.Sprintf("%s %d", prefix, i))
		}
	}

	for _, workers := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("NextFreeSlotWorkers%d", workers), func(t *testing.T) {
			t.Parallel()
			// Every reply takes 300 ms: bob waits at most for the first
			// of alice's replies to end, never for her backlog.
			tb := setup(t)
			m := newTimedModel(300*time.Millisecond, 0)
			_, res := tb.start(t, Config{Workers: workers, Models: modelsWith(m)})
			alone := baseline(t, tb, m, res)
			flood(t, tb, m, "alice", 4*workers+8, workers)
			sentAt := time.Now()
			tb.sendAs(t, "bob", "bob flooded")
			took := m.waitStart(t, "bob flooded").Sub(sentAt)
			t.Logf("%d workers: bob's prompt reached the model in %s alone, %s behind alice's %d", workers, alone, took, 4*workers+8)
			if took > alone+time.Second {
				t.Errorf("bob's prompt took %s to start behind alice's flood, more than a second over its %s alone", took, alone)
			}
		})
	}

	for _, workers := range []int{4, 16} {
		t.Run(fmt.Sprintf("ReservedSlotWorkers%d", workers), func(t *testing.T) {
			t.Parallel()
			// alice's replies take 4 s: without the reserved slot bob
			// would wait for one of them to end.
			tb := setup(t)
			m := newTimedModel(100*time.Millisecond, 4*time.Second)
			_, res := tb.start(t, Config{Workers: workers, ReservedSlots: 1, Models: modelsWith(m)})
			alone := baseline(t, tb, m, res)
			flood(t, tb, m, "long", 2*workers, workers-1)
			sentAt := time.Now()
			tb.sendAs(t, "bob", "bob flooded")
			took := m.waitStart(t, "bob flooded").Sub(sentAt)
			t.Logf("%d workers, 1 reserved: bob's prompt reached the model in %s alone, %s behind alice's flood", workers, alone, took)
			if took > alone+time.Second {
				t.Errorf("bob's prompt took %s to start behind alice's flood of long replies, more than a second over its %s alone", took, alone)
			}
		})
	}

	t.Run("ShortRepliesKeepTheirShare", func(t *testing.T) {
		t.Parallel()
		// alice's replies take 3 s, bob's 100 ms, 4 workers: each holds
		// 2 slots, and each slot bob's reply frees goes back to bob (he
		// holds fewer), so his 10 replies end long before alice's first.
		// Served round-robin by the time of their last claim instead,
		// alice would take every other slot bob freed until she held
		// all 4, and bob would wait 3 s.
		tb := setup(t)
		m := newTimedModel(100*time.Millisecond, 3*time.Second)
		var mu sync.Mutex
		ended := map[uuid.UUID]time.Time{}
		var alice, bob []uuid.UUID
		for i := range 8 {
			alice = append(alice, tb.sendAs(t, "alice", fmt.Sprintf("long %d", i)).promptID)
		}
		for i := range 10 {
			bob = append(bob, tb.sendAs(t, "bob", fmt.Sprintf("short %d", i)).promptID)
		}
		_, res := tb.start(t, Config{Workers: 4, Models: modelsWith(m), OnPromptDone: func(r Result) {
			mu.Lock()
			ended[r.PromptID] = time.Now()
			mu.Unlock()
		}})
		var bobDone time.Time
		for _, id := range bob {
			if r := res.wait(t, id, 30*time.Second); r.Outcome != OutcomeCompleted {
				t.Fatalf("bob's prompt: %s, %v", r.Outcome, r.Err)
			}
			mu.Lock()
			if ended[id].After(bobDone) {
				bobDone = ended[id]
			}
			mu.Unlock()
		}
		r := res.wait(t, alice[0], 30*time.Second)
		mu.Lock()
		aliceFirst := ended[r.PromptID]
		mu.Unlock()
		if !bobDone.Before(aliceFirst) {
			t.Errorf("bob's last short reply ended %s after alice's first long one: alice took the slots bob's replies freed", bobDone.Sub(aliceFirst))
		}
	})
}
