package presence

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestRecordsRoundTrip: records survive a payload whatever their user ids
// hold, are batched under PostgreSQL's payload limit, and a record too
// large for any payload is dropped alone.
func TestRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	var in []record
	for i := range 300 {
		in = append(in, record{kind: kindView, conversation: id, user: "user with spaces\nand newlines " + strings.Repeat("x", i%40)})
	}
	in = append(in, record{kind: kindTyping, conversation: id, user: strings.Repeat("y", 9000)}, record{kind: kindSync})
	payloads := encode("server 1", in)
	if len(payloads) < 2 {
		t.Fatalf("%d payloads for 300 records of about 60 bytes, want them split", len(payloads))
	}
	var out []record
	for _, p := range payloads {
		if len(p) > maxPayload {
			t.Fatalf("a payload of %d bytes, over %d", len(p), maxPayload)
		}
		server, records := decode(p)
		if server != "server 1" {
			t.Fatalf("server %q", server)
		}
		out = append(out, records...)
	}
	want := append(in[:300:300], record{kind: kindSync})
	if len(out) != len(want) {
		t.Fatalf("%d records back, want %d", len(out), len(want))
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("record %d is %+v, want %+v", i, out[i], want[i])
		}
	}
	if server, records := decode("2 other\nv " + id.String() + " u"); server != "" || records != nil {
		t.Fatal("a payload of another version was read")
	}
	if _, records := decode("1 other\nv not-a-uuid u\nv " + id.String() + " \nx"); len(records) != 0 {
		t.Fatalf("malformed records were read: %+v", records)
	}
}

// clocked returns a tracker on a clock the test moves, and the lists it
// published.
func clocked(opts Options) (*Tracker, *time.Time, func() map[uuid.UUID][]Entry) {
	var mu sync.Mutex
	published := map[uuid.UUID][]Entry{}
	opts.Publish = func(id uuid.UUID, entries []Entry) {
		mu.Lock()
		defer mu.Unlock()
		published[id] = entries
	}
	tr := New(opts)
	now := time.Unix(1_000_000, 0)
	tr.now = func() time.Time { return now }
	return tr, &now, func() map[uuid.UUID][]Entry {
		mu.Lock()
		defer mu.Unlock()
		return published
	}
}

// TestTrackerLists: joins, leaves, typing and other servers' records make
// the lists published; expiries remove typing and crashed servers'
// viewers; a server's own records heard back change nothing; the users of
// a conversation are capped.
func TestTrackerLists(t *testing.T) {
	t.Parallel()
	tr, now, published := clocked(Options{MaxUsers: 3})
	id := uuid.New()
	var first []Entry
	leave := tr.Join(id, "alice", func(e []Entry) { first = e })
	if len(first) != 1 || first[0] != (Entry{UserID: "alice", Viewing: true}) {
		t.Fatalf("Join's current list is %v", first)
	}
	leave2 := tr.Join(id, "alice", nil)
	tr.SetTyping(id, "alice", true)
	tr.receive("1 other\nv " + id.String() + " bob\nt " + id.String() + " carol")
	tr.receive("1 " + tr.ServerID() + "\nv " + id.String() + " self")
	want := []Entry{{UserID: "alice", Viewing: true, Typing: true}, {UserID: "bob", Viewing: true}, {UserID: "carol", Typing: true}}
	if got := tr.Current(id); !equal(got, want) || !equal(published()[id], want) {
		t.Fatalf("list %v, published %v; want %v", got, published()[id], want)
	}
	// Full: a fourth user is not added.
	tr.receive("1 other\nv " + id.String() + " dave")
	if got := tr.Current(id); len(got) != 3 {
		t.Fatalf("a fourth user was added past MaxUsers 3: %v", got)
	}

	*now = now.Add(DefaultTypingTTL + time.Millisecond)
	tr.sweep()
	want = []Entry{{UserID: "alice", Viewing: true}, {UserID: "bob", Viewing: true}}
	if got := tr.Current(id); !equal(got, want) {
		t.Fatalf("after the typing TTL: %v, want %v", got, want)
	}
	*now = now.Add(DefaultViewerTTL)
	tr.sweep()
	leave()
	leave() // once only
	want = []Entry{{UserID: "alice", Viewing: true}}
	if got := tr.Current(id); !equal(got, want) {
		t.Fatalf("after the viewer TTL, one of two streams left: %v, want %v", got, want)
	}
	leave2()
	if got := published()[id]; len(got) != 0 {
		t.Fatalf("after the last stream left: %v", got)
	}
	if len(tr.rooms) != 0 {
		t.Fatalf("an empty conversation is kept: %d rooms", len(tr.rooms))
	}
}

func equal(a, b []Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTrackerQueues: a server queues its changes for the others (the
// first stream of a user, its last leaving, typing), and after a reconnect
// asks for the others' viewers and repeats its own.
func TestTrackerQueues(t *testing.T) {
	t.Parallel()
	tr, _, _ := clocked(Options{Send: func(context.Context, string) error { return nil }})
	id := uuid.New()
	leave := tr.Join(id, "alice", nil)
	leave2 := tr.Join(id, "alice", nil)
	tr.SetTyping(id, "alice", true)
	leave()
	leave2()
	tr.SetTyping(id, "alice", false)
	tr.Join(id, "bob", nil)
	tr.resync()
	tr.receive("1 other\ns 00000000-0000-0000-0000-000000000000 ")
	var got []string
	for _, r := range tr.out {
		got = append(got, string(r.kind)+" "+r.user)
	}
	want := "v alice|t alice|l alice|i alice|v bob|s |v bob"
	if strings.Join(got, "|") != want || !tr.syncAsked {
		t.Fatalf("queued %q (sync asked: %v), want %q", strings.Join(got, "|"), tr.syncAsked, want)
	}
}
