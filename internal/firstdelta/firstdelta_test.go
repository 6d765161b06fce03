package firstdelta

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

func delta(conv, prompt uuid.UUID, seq int64, created time.Time) conversation.Event {
	return conversation.Event{
		ConversationID: conv, Seq: seq, Kind: conversation.EventBlockDelta,
		PromptID: uuid.NullUUID{UUID: prompt, Valid: true}, CreatedAt: created,
	}
}

func stages(t *testing.T, r *Recorder, prompt uuid.UUID) map[string]int64 {
	t.Helper()
	records, _ := r.Records()
	for _, rec := range records {
		if rec.PromptID == prompt {
			return rec.Stages
		}
	}
	return nil
}

// TestOffRecordsNothing: until Enable, and after Disable, no hook records.
func TestOffRecordsNothing(t *testing.T) {
	t.Parallel()
	r := &Recorder{}
	p, c := uuid.New(), uuid.New()
	now := time.Now()
	r.Mark(p, Claimed, now)
	r.Hinted(c, 3, now)
	r.HubRead(delta(c, p, 3, now), now)
	r.StreamTook(delta(c, p, 3, now), now)
	if records, dropped := r.Records(); len(records) != 0 || dropped != 0 || r.On() {
		t.Errorf("off, it recorded %v (dropped %d, on %v)", records, dropped, r.On())
	}
	r.Enable()
	r.Mark(p, Claimed, now)
	r.Disable()
	r.Mark(p, Started, now)
	if records, _ := r.Records(); len(records) != 0 {
		t.Errorf("after Disable: %v", records)
	}
}

// TestFirstDeltaStages: each stage keeps its first time; the hub's read
// of a prompt's first blockDelta records its insert, the first
// notification of its seq or a later one, and the read; later deltas,
// other kinds and replayed deltas change nothing.
func TestFirstDeltaStages(t *testing.T) {
	t.Parallel()
	r := &Recorder{}
	r.Enable()
	p, c := uuid.New(), uuid.New()
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r.Mark(p, Claimed, at(1))
	r.Mark(p, Claimed, at(99)) // not the first
	r.Mark(p, Started, at(2))
	r.Mark(p, Produced, at(3))
	r.Hinted(c, 4, at(4))  // an earlier event (promptStarted)
	r.Hinted(c, 6, at(6))  // the batch holding the delta (seq 5) and another
	r.Hinted(c, 7, at(7))  // a later one
	r.Hinted(c, -1, at(5)) // seq unknown: not a notification of a seq
	r.HubRead(conversation.Event{ConversationID: c, Seq: 4, Kind: conversation.EventPromptStarted, PromptID: uuid.NullUUID{UUID: p, Valid: true}}, at(8))
	r.HubRead(delta(c, p, 5, at(5)), at(9))
	r.HubRead(delta(c, p, 6, at(6)), at(10)) // a later delta
	replay := delta(c, p, 5, at(5))
	replay.Replay = true
	r.StreamTook(replay, at(10))
	r.StreamTook(conversation.Event{ConversationID: c, Seq: 4, Kind: conversation.EventPromptStarted, PromptID: uuid.NullUUID{UUID: p, Valid: true}}, at(10))
	r.StreamTook(delta(c, p, 5, at(5)), at(11))
	r.StreamTook(delta(c, p, 6, at(6)), at(12))
	got := stages(t, r, p)
	want := map[string]int64{}
	for s, ms := range map[Stage]int{Claimed: 1, Started: 2, Produced: 3, Inserted: 5, Notified: 6, Read: 9, Dequeued: 11} {
		want[s.String()] = at(ms).UnixNano()
	}
	if len(got) != len(want) {
		t.Errorf("stages %v, want %v", got, want)
	}
	for name, ns := range want {
		if got[name] != ns {
			t.Errorf("%s at %v, want %v", name, time.Unix(0, got[name]).Sub(t0), time.Unix(0, ns).Sub(t0))
		}
	}
	// Read up to seq 6: only the notification of seq 7 is still pending.
	r.mu.Lock()
	pending := r.hints[c]
	r.mu.Unlock()
	if len(pending) != 1 || pending[0].seq != 7 {
		t.Errorf("pending notifications %v, want seq 7's", pending)
	}
	r.HubRead(delta(c, p, 7, at(7)), at(13))
	r.mu.Lock()
	_, left := r.hints[c]
	r.mu.Unlock()
	if left {
		t.Error("a conversation read to its last notification still holds notifications")
	}
}

// TestBounds: past MaxPrompts prompts and MaxConversations conversations
// with pending notifications, new ones are counted, not recorded; a
// conversation keeps its last 16 notifications.
func TestBounds(t *testing.T) {
	t.Parallel()
	r := &Recorder{}
	r.Enable()
	now := time.Now()
	for range MaxPrompts + 3 {
		r.Mark(uuid.New(), Claimed, now)
	}
	for range MaxConversations + 2 {
		r.Hinted(uuid.New(), 1, now)
	}
	c := uuid.New()
	records, dropped := r.Records()
	if len(records) != MaxPrompts || dropped != 5 {
		t.Errorf("%d prompts kept, %d dropped; want %d and 5", len(records), dropped, MaxPrompts)
	}
	r.Enable()
	for seq := range int64(40) {
		r.Hinted(c, seq+1, now)
	}
	r.mu.Lock()
	hs := r.hints[c]
	r.mu.Unlock()
	if len(hs) != hintsPerConv || hs[0].seq != 40-hintsPerConv+1 || hs[len(hs)-1].seq != 40 {
		t.Errorf("kept %d notifications from seq %d", len(hs), hs[0].seq)
	}
}

// TestHandler: POST enables afresh, GET reads, DELETE disables; other
// methods are refused.
func TestHandler(t *testing.T) {
	t.Parallel()
	r := &Recorder{}
	h := r.Handler()
	type body struct {
		Enabled bool
		Dropped int64
		Prompts []Record
	}
	do := func(method string) (int, body) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, "/debug/first-delta", nil))
		var b body
		if w.Code == http.StatusOK {
			if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
				t.Fatalf("%s: %v: %s", method, err, w.Body)
			}
		}
		return w.Code, b
	}
	if code, b := do(http.MethodGet); code != http.StatusOK || b.Enabled || len(b.Prompts) != 0 {
		t.Errorf("GET before POST: %d %+v", code, b)
	}
	if code, b := do(http.MethodPost); code != http.StatusOK || !b.Enabled {
		t.Errorf("POST: %d %+v", code, b)
	}
	p := uuid.New()
	now := time.Now()
	r.Mark(p, Started, now)
	if code, b := do(http.MethodGet); code != http.StatusOK || len(b.Prompts) != 1 || b.Prompts[0].PromptID != p || b.Prompts[0].Stages["started"] != now.UnixNano() {
		t.Errorf("GET: %d %+v", code, b)
	}
	if _, b := do(http.MethodPost); len(b.Prompts) != 0 {
		t.Errorf("a second POST kept %v", b.Prompts)
	}
	if code, b := do(http.MethodDelete); code != http.StatusOK || b.Enabled {
		t.Errorf("DELETE: %d %+v", code, b)
	}
	if code, _ := do(http.MethodPut); code != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %d", code)
	}
}
