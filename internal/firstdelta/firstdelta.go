// Package firstdelta is a debug timing of the way from a message's send to
// its reply's first delta, recorded per prompt in this process: when the
// worker claimed the prompt, when start_prompt was written, when the model's
// first text reached the worker's writer, when the first delta event was
// inserted (its created_at, the database's clock), when the hub heard the
// notification that led it there, when the hub's read of the log returned
// it, and when a stream took it from its subscription to write it. The
// chat bench (cmd/bench --run chat) joins these with its client's send and
// receive times to say where the first token's time goes.
//
// It records nothing until Enable (the admin address's POST
// /debug/first-delta): off, every hook is one atomic load. On, it keeps at
// most MaxPrompts prompts and the pending notifications of at most
// MaxConversations conversations (16 each); past a bound, new ones are
// counted as dropped, not recorded.
package firstdelta

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

// Stage is one step on the way to a reply's first delta.
type Stage int

// The stages, in the order they happen for a reader subscribed before its
// reply starts.
const (
	// Claimed: the worker's claim returned the prompt.
	Claimed Stage = iota
	// Started: the worker's batch with start_prompt was written.
	Started
	// Produced: the model's first text reached the worker's writer.
	Produced
	// Inserted: the first delta event's created_at (inside the
	// write_batch that holds it; the database's clock).
	Inserted
	// Notified: the hub heard the notification of that event's seq or a
	// later one (the first such); none with the logical feed.
	Notified
	// Read: the hub's read of the log (or the logical feed's delivery)
	// returned the event.
	Read
	// Dequeued: a stream took the event from its subscription to write it
	// (the socket write follows, flushed once nothing else is ready).
	Dequeued
	numStages
)

var stageNames = [numStages]string{"claimed", "started", "produced", "inserted", "notified", "read", "dequeued"}

// String is the stage's name in Records' JSON.
func (s Stage) String() string {
	if s < 0 || s >= numStages {
		return "unknown"
	}
	return stageNames[s]
}

// Bounds of what the recorder holds while on.
const (
	MaxPrompts       = 100_000
	MaxConversations = 100_000
	hintsPerConv     = 16
)

type hint struct {
	seq int64
	at  time.Time
}

// Recorder holds the stages of prompts. Its zero value is off; the
// process's hooks record into Default, through the package's functions.
type Recorder struct {
	on      atomic.Bool
	mu      sync.Mutex
	prompts map[uuid.UUID]*[numStages]time.Time
	hints   map[uuid.UUID][]hint
	dropped int64
}

// Default is the process's recorder.
var Default = &Recorder{}

// Enable starts a fresh record of Default (forgetting the last one).
func Enable() { Default.Enable() }

// On reports whether Default records: the hooks check it first.
func On() bool { return Default.On() }

// Mark records into Default that prompt reached stage s at t.
func Mark(prompt uuid.UUID, s Stage, t time.Time) { Default.Mark(prompt, s, t) }

// Hinted records into Default a notification heard (Recorder.Hinted).
func Hinted(conversationID uuid.UUID, seq int64, t time.Time) { Default.Hinted(conversationID, seq, t) }

// HubRead records into Default an event the hub read (Recorder.HubRead).
func HubRead(e conversation.Event, t time.Time) { Default.HubRead(e, t) }

// StreamTook records into Default an event a stream took
// (Recorder.StreamTook).
func StreamTook(e conversation.Event, t time.Time) { Default.StreamTook(e, t) }

// Handler serves Default (see Recorder.Handler).
func Handler() http.Handler { return Default.Handler() }

// Enable starts a fresh record (forgetting the last one).
func (rec *Recorder) Enable() {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.prompts = make(map[uuid.UUID]*[numStages]time.Time)
	rec.hints = make(map[uuid.UUID][]hint)
	rec.dropped = 0
	rec.on.Store(true)
}

// Disable stops recording and forgets the record.
func (rec *Recorder) Disable() {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.on.Store(false)
	rec.prompts, rec.hints, rec.dropped = nil, nil, 0
}

// On reports whether the recorder records.
func (rec *Recorder) On() bool { return rec.on.Load() }

// Mark records that prompt reached stage s at t, unless it did before.
func (rec *Recorder) Mark(prompt uuid.UUID, s Stage, t time.Time) {
	if !rec.on.Load() || s < 0 || s >= numStages {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.markLocked(prompt, s, t)
}

func (r *Recorder) markLocked(prompt uuid.UUID, s Stage, t time.Time) {
	if r.prompts == nil {
		return // disabled meanwhile
	}
	p, ok := r.prompts[prompt]
	if !ok {
		if len(r.prompts) >= MaxPrompts {
			r.dropped++
			return
		}
		p = new([numStages]time.Time)
		r.prompts[prompt] = p
	}
	if p[s].IsZero() {
		p[s] = t
	}
}

// Hinted records that the hub heard, at t, that conversation has an event
// with seq (a notification of the feed).
func (rec *Recorder) Hinted(conversationID uuid.UUID, seq int64, t time.Time) {
	if !rec.on.Load() || seq <= 0 {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.hints == nil {
		return
	}
	hs, ok := rec.hints[conversationID]
	if !ok && len(rec.hints) >= MaxConversations {
		rec.dropped++
		return
	}
	if len(hs) == hintsPerConv {
		hs = hs[:copy(hs, hs[1:])]
	}
	rec.hints[conversationID] = append(hs, hint{seq, t})
}

// HubRead records that the hub's read of the log returned e at t: for a
// prompt's first blockDelta, its insert (e.CreatedAt), the first
// notification heard of its seq or a later one, and the read. The
// notifications of e's conversation up to e's seq are then spent.
func (rec *Recorder) HubRead(e conversation.Event, t time.Time) {
	if !rec.on.Load() {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.hints == nil {
		return
	}
	hs := rec.hints[e.ConversationID]
	if e.Kind == conversation.EventBlockDelta && e.PromptID.Valid {
		if p, ok := rec.prompts[e.PromptID.UUID]; !ok || p[Read].IsZero() {
			rec.markLocked(e.PromptID.UUID, Inserted, e.CreatedAt)
			rec.markLocked(e.PromptID.UUID, Read, t)
			for _, h := range hs {
				if h.seq >= e.Seq {
					rec.markLocked(e.PromptID.UUID, Notified, h.at)
					break
				}
			}
		}
	}
	if len(hs) == 0 {
		return
	}
	i := 0
	for i < len(hs) && hs[i].seq <= e.Seq {
		i++
	}
	if i == len(hs) {
		delete(rec.hints, e.ConversationID)
	} else if i > 0 {
		rec.hints[e.ConversationID] = hs[:copy(hs, hs[i:])]
	}
}

// StreamTook records that a stream took e from its subscription at t: the
// Dequeued stage of the prompt's first (not replayed) blockDelta.
func (rec *Recorder) StreamTook(e conversation.Event, t time.Time) {
	if !rec.on.Load() || e.Kind != conversation.EventBlockDelta || !e.PromptID.Valid || e.Replay {
		return
	}
	rec.Mark(e.PromptID.UUID, Dequeued, t)
}

// Record is one prompt's stages, each in Unix nanoseconds by its name (a
// stage that did not happen in this process is absent).
type Record struct {
	PromptID uuid.UUID        `json:"prompt_id"`
	Stages   map[string]int64 `json:"stages"`
}

// Records returns what was recorded since Enable, and how many prompts
// and conversations the bounds left out.
func (rec *Recorder) Records() (records []Record, dropped int64) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	records = make([]Record, 0, len(rec.prompts))
	for id, p := range rec.prompts {
		r := Record{PromptID: id, Stages: make(map[string]int64, numStages)}
		for s, t := range p {
			if !t.IsZero() {
				r.Stages[Stage(s).String()] = t.UnixNano()
			}
		}
		records = append(records, r)
	}
	return records, rec.dropped
}

// Handler serves the recorder: GET returns {"enabled", "dropped",
// "prompts": [Record…]}; POST enables it afresh; DELETE disables it and
// forgets the record (each answers as GET then). Other methods get 405.
func (rec *Recorder) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
		case http.MethodPost:
			rec.Enable()
		case http.MethodDelete:
			rec.Disable()
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			http.Error(w, "GET, POST or DELETE", http.StatusMethodNotAllowed)
			return
		}
		records, dropped := rec.Records()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Enabled bool     `json:"enabled"`
			Dropped int64    `json:"dropped"`
			Prompts []Record `json:"prompts"`
		}{rec.On(), dropped, records})
	})
}
