package presence

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Records.
//
// One NOTIFY payload on Channel carries the records of one server: a first
// line "1 <server id>" (the format's version), then one line per record,
// "<kind> <conversation id> <user id>", the ids query-escaped so that a
// user id holds no space nor newline. Records are batched up to
// maxPayload bytes (PostgreSQL refuses payloads of 8000 bytes or more).

// The kinds of record.
const (
	kindView   byte = 'v' // the user views the conversation on the sender (also its heartbeat)
	kindLeave  byte = 'l' // the user's last stream of it on the sender ended
	kindTyping byte = 't' // the user is typing (for TypingTTL)
	kindIdle   byte = 'i' // the user stopped typing
	kindSync   byte = 's' // the sender (re)started listening: repeat your viewers now
)

// record is one presence change.
type record struct {
	kind         byte
	conversation uuid.UUID
	user         string
}

// maxPayload bounds one NOTIFY payload, under PostgreSQL's 8000 bytes.
const maxPayload = 7900

// maxQueued bounds the records waiting to be sent: past it new ones are
// dropped (the heartbeat repeats the viewers; a lost typing report expires
// anyway), so a database that does not answer costs no memory.
const maxQueued = 10_000

// encode packs records into payloads of at most maxPayload bytes; a record
// that cannot fit alone (a user id of thousands of bytes) is dropped.
func encode(server string, records []record) []string {
	header := "1 " + url.QueryEscape(server)
	var out []string
	var b strings.Builder
	for _, r := range records {
		line := string(r.kind) + " " + r.conversation.String() + " " + url.QueryEscape(r.user)
		if len(header)+1+len(line) > maxPayload {
			continue
		}
		if b.Len() > 0 && b.Len()+1+len(line) > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString(header)
		}
		b.WriteByte('\n')
		b.WriteString(line)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// decode reads a payload; malformed lines are skipped, and a payload of
// another version gives nothing.
func decode(payload string) (server string, records []record) {
	header, rest, _ := strings.Cut(payload, "\n")
	version, server, ok := strings.Cut(header, " ")
	if !ok || version != "1" {
		return "", nil
	}
	server, err := url.QueryUnescape(server)
	if err != nil || server == "" {
		return "", nil
	}
	for line := range strings.SplitSeq(rest, "\n") {
		kind, tail, ok := strings.Cut(line, " ")
		if !ok || len(kind) != 1 {
			continue
		}
		idText, userText, ok := strings.Cut(tail, " ")
		if !ok {
			continue
		}
		r := record{kind: kind[0]}
		if r.kind != kindSync {
			if r.conversation, err = uuid.Parse(idText); err != nil {
				continue
			}
			if r.user, err = url.QueryUnescape(userText); err != nil || r.user == "" {
				continue
			}
		}
		records = append(records, r)
	}
	return server, records
}

// queueLocked queues r to be sent, and wakes the sender. The caller holds
// t.mu.
func (t *Tracker) queueLocked(r record) {
	if t.opts.Send == nil || len(t.out) >= maxQueued {
		return
	}
	t.out = append(t.out, r)
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// receive applies another server's payload (the listener's Notify: quick,
// never blocking).
func (t *Tracker) receive(payload string) {
	server, records := decode(payload)
	if server == "" || server == t.opts.ServerID {
		return // this server's own records, heard back
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range records {
		if r.kind == kindSync {
			t.syncAsked = true
			select {
			case t.wake <- struct{}{}:
			default:
			}
			continue
		}
		rm, ok := t.rooms[r.conversation]
		if !ok {
			if r.kind != kindView && r.kind != kindTyping {
				continue // nothing to take back
			}
			if len(t.rooms) >= t.opts.MaxConversations {
				continue
			}
		}
		switch r.kind {
		case kindView:
			rm = t.room(r.conversation)
			if !rm.has(r.user) && rm.users() >= t.opts.MaxUsers {
				t.changedLocked(r.conversation, rm)
				continue
			}
			servers := rm.remote[r.user]
			if servers == nil {
				servers = map[string]time.Time{}
				rm.remote[r.user] = servers
			}
			servers[server] = now.Add(t.opts.ViewerTTL)
		case kindLeave:
			if servers := rm.remote[r.user]; servers != nil {
				delete(servers, server)
				if len(servers) == 0 {
					delete(rm.remote, r.user)
				}
			}
		case kindTyping, kindIdle:
			t.setTypingLocked(r.conversation, r.user, r.kind == kindTyping)
			continue
		default:
			continue
		}
		t.changedLocked(r.conversation, rm)
	}
}

// resync runs after each (re)connect of the listener: this server's
// viewers are announced again (the others may have expired them while it
// was away) and the others are asked for theirs.
func (t *Tracker) resync() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.queueLocked(record{kind: kindSync})
	t.heartbeatLocked()
}

// heartbeatLocked queues a view record for every user viewing here. The
// caller holds t.mu.
func (t *Tracker) heartbeatLocked() {
	for id, r := range t.rooms {
		for u := range r.local {
			t.queueLocked(record{kind: kindView, conversation: id, user: u})
		}
	}
}

// sweepEvery is how often expired reports are looked for: a typing report
// ends between TypingTTL and TypingTTL plus this after it was made.
const sweepEvery = 250 * time.Millisecond

// sendTimeout bounds one NOTIFY.
const sendTimeout = 5 * time.Second

// Run sends the queued records, repeats this server's viewers every
// Heartbeat and forgets what expired, until ctx ends. Records are sent on
// a goroutine of their own, so a slow database never delays an expiry.
func (t *Tracker) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.sendLoop(ctx)
	}()
	defer func() { <-done }()
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	heartbeat := time.NewTicker(t.opts.Heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			t.sweep()
		case <-heartbeat.C:
			t.mu.Lock()
			t.heartbeatLocked()
			t.mu.Unlock()
		}
	}
}

// sendLoop sends what is queued each time the queue wakes it; another
// server's sync request has this server's viewers repeated first.
func (t *Tracker) sendLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.wake:
		}
		t.mu.Lock()
		if t.syncAsked {
			t.syncAsked = false
			t.heartbeatLocked()
		}
		out := t.out
		t.out = nil
		t.mu.Unlock()
		if len(out) > 0 {
			t.send(ctx, out)
		}
	}
}

// send sends records; a failure is logged and the records dropped: the
// heartbeat and the TTLs repair what they said.
func (t *Tracker) send(ctx context.Context, records []record) {
	for _, payload := range encode(t.opts.ServerID, records) {
		sendCtx, cancel := context.WithTimeout(ctx, sendTimeout)
		err := t.opts.Send(sendCtx, payload)
		cancel()
		if err != nil && ctx.Err() == nil {
			t.opts.Logger.Warn("presence: could not notify the other servers; their lists catch up at the next heartbeat", "err", err)
			return
		}
	}
}
