package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

func (tb *testBundle) eventsURL(id uuid.UUID) string {
	return fmt.Sprintf("%s/v1/conversations/%s/events", tb.url, id)
}

// event decodes an SSE event's data as the Connect API's Event, checking
// that its id and name are its seq and kind.
func decodeEvent(t testing.TB, ev sseEvent) *convov1.Event {
	t.Helper()
	out := &convov1.Event{}
	if err := protojson.Unmarshal([]byte(ev.data), out); err != nil {
		t.Fatalf("event %q: %v", ev.data, err)
	}
	m := out.ProtoReflect()
	kind := m.WhichOneof(m.Descriptor().Oneofs().ByName("kind"))
	if kind == nil || ev.name != kind.JSONName() {
		t.Fatalf("SSE event named %q carries %v", ev.name, out)
	}
	if ev.hasID && ev.id != strconv.FormatInt(out.Seq, 10) {
		t.Fatalf("SSE id %q, event seq %d", ev.id, out.Seq)
	}
	return out
}

func TestEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SnapshotThenEventsWithIDs", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		s := tb.send(t, "local", uuid.Nil, "hello")
		c := openSSE(t, "GET", tb.eventsURL(s.conversationID), nil, nil)
		h := c.resp.Header
		if h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache" || h.Get("X-Accel-Buffering") != "no" {
			t.Errorf("headers = %v", h)
		}
		select {
		case r := <-c.retry:
			if r != "2000" {
				t.Errorf("retry: %s, want 2000", r)
			}
		case <-time.After(waitTimeout):
			t.Fatal("no retry field")
		}

		first := c.next(t)
		snap := &convov1.Snapshot{}
		if err := protojson.Unmarshal([]byte(first.data), snap); err != nil || first.name != "snapshot" {
			t.Fatalf("first event %+v: %v", first, err)
		}
		st := tb.state(t, "local", s.conversationID)
		if first.id != strconv.FormatInt(st.Seq, 10) || snap.Seq != st.Seq || len(snap.Messages) != 2 ||
			snap.Messages[0].Blocks[0].Content != "hello" {
			t.Fatalf("snapshot id %q = %v; want the state at seq %d", first.id, snap, st.Seq)
		}

		tb.startPrompt(t, s.promptID)
		block := tb.startBlock(t, s.promptID, "text", "{}")
		tb.appendText(t, block, "Hi", " there")
		tb.completePrompt(t, s.promptID)
		var names []string
		for seq := st.Seq + 1; ; seq++ {
			ev := c.next(t)
			if !ev.hasID || ev.id != strconv.FormatInt(seq, 10) {
				t.Fatalf("event %+v; want id %d", ev, seq)
			}
			e := decodeEvent(t, ev)
			names = append(names, ev.name)
			if d := e.GetBlockDelta(); d != nil && d.BlockId != block.String() {
				t.Errorf("delta of block %s", d.BlockId)
			}
			if e.GetPromptCompleted() != nil {
				break
			}
		}
		want := "promptStarted messageUpdated blockStart blockDelta blockDelta blockEnd promptCompleted"
		if got := strings.Join(names, " "); !strings.HasPrefix(got, want) {
			t.Errorf("events %s; want %s", got, want)
		}
	})

	t.Run("LateJoinerGetsTheReplayAsOneUnit", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		s := tb.send(t, "local", uuid.Nil, "hello")
		tb.startPrompt(t, s.promptID)
		block := tb.startBlock(t, s.promptID, "text", "{}")
		tb.appendText(t, block, "Hello, ", "wor")
		seq := tb.state(t, "local", s.conversationID).Seq

		c := openSSE(t, "GET", tb.eventsURL(s.conversationID), nil, nil)
		// Only the unit's last event carries an id: a client cut off
		// inside it never resumes from half a state.
		snap, start, delta := c.next(t), c.next(t), c.next(t)
		if snap.name != "snapshot" || snap.hasID || start.name != "blockStart" || start.hasID {
			t.Fatalf("unit starts %+v, %+v; want the snapshot and the replayed blockStart without ids", snap, start)
		}
		d := decodeEvent(t, delta)
		if delta.id != strconv.FormatInt(seq, 10) || !d.Replay || d.GetBlockDelta().GetContent() != "Hello, wor" {
			t.Fatalf("replayed delta %+v; want the text so far with id %d", delta, seq)
		}
		tb.appendText(t, block, "ld!")
		if got := decodeEvent(t, c.next(t)).GetBlockDelta().GetContent(); got != "ld!" {
			t.Fatalf("next delta %q", got)
		}
	})

	t.Run("ResumesAfterLastEventID", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		s := tb.send(t, "local", uuid.Nil, "hello")
		tb.startPrompt(t, s.promptID)
		block := tb.startBlock(t, s.promptID, "text", "{}")
		tb.appendText(t, block, "one", "two", "three")
		last := tb.state(t, "local", s.conversationID).Seq

		for name, req := range map[string]struct {
			url    string
			header http.Header
		}{
			"LastEventID": {tb.eventsURL(s.conversationID), http.Header{"Last-Event-ID": {strconv.FormatInt(last-2, 10)}}},
			"AfterQuery":  {tb.eventsURL(s.conversationID) + "?after=" + strconv.FormatInt(last-2, 10), nil},
			// EventSource reconnects to the same URL with the newer id.
			"HeaderWins": {tb.eventsURL(s.conversationID) + "?after=1", http.Header{"Last-Event-ID": {strconv.FormatInt(last-2, 10)}}},
		} {
			t.Run(name, func(t *testing.T) {
				c := openSSE(t, "GET", req.url, req.header, nil)
				for _, want := range []string{"two", "three"} {
					ev := c.next(t)
					if got := decodeEvent(t, ev).GetBlockDelta().GetContent(); got != want || ev.name == "snapshot" {
						t.Fatalf("resumed with %+v; want the delta %q", ev, want)
					}
				}
				c.close()
			})
		}
	})

	t.Run("DropAndResumeLosesAndRepeatsNothing", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		s := tb.send(t, "local", uuid.Nil, "hello")
		tb.startPrompt(t, s.promptID)
		block := tb.startBlock(t, s.promptID, "text", "{}")
		var want strings.Builder
		write := func(from, to int) {
			for i := from; i < to; i++ {
				d := fmt.Sprintf("[%d]", i)
				want.WriteString(d)
				tb.appendText(t, block, d)
			}
		}

		// A client reads, its connection drops, it reconnects with the
		// last id it saw, three times over, while the reply goes on.
		var got strings.Builder
		var seqs []int64
		lastID := ""
		read := func(c *sseClient, until string) {
			for {
				ev := c.next(t)
				if ev.name == "snapshot" {
					continue
				}
				e := decodeEvent(t, ev)
				seqs = append(seqs, e.Seq)
				got.WriteString(e.GetBlockDelta().GetContent())
				if ev.hasID {
					lastID = ev.id
				}
				if strings.HasSuffix(got.String(), until) || e.GetPromptCompleted() != nil {
					return
				}
			}
		}
		c := openSSE(t, "GET", tb.eventsURL(s.conversationID), nil, nil)
		write(0, 10)
		read(c, "[9]")
		for round := 1; round <= 3; round++ {
			c.close()
			write(round*10, round*10+5) // while disconnected
			c = openSSE(t, "GET", tb.eventsURL(s.conversationID), http.Header{"Last-Event-ID": {lastID}}, nil)
			write(round*10+5, round*10+10)
			read(c, fmt.Sprintf("[%d]", round*10+9))
		}
		tb.completePrompt(t, s.promptID)
		read(c, "\x00")

		if got.String() != want.String() {
			t.Errorf("text across reconnects:\n%s\nwant\n%s", got.String(), want.String())
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]+1 {
				t.Fatalf("seqs %v: not one after the other", seqs)
			}
		}
		if final := tb.state(t, "local", s.conversationID); seqs[len(seqs)-1] > final.Seq {
			t.Fatalf("read up to %d, log ends at %d", seqs[len(seqs)-1], final.Seq)
		}
	})

	t.Run("KeepAliveOnIdleStream", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, setupOptions{keepAlive: 20 * time.Millisecond})
		s := tb.send(t, "local", uuid.Nil, "hello")
		c := openSSE(t, "GET", tb.eventsURL(s.conversationID), nil, nil)
		c.next(t) // the snapshot
		for range 2 {
			select {
			case comment := <-c.comments:
				if comment != "keep-alive" {
					t.Fatalf("comment %q", comment)
				}
			case <-time.After(waitTimeout):
				t.Fatal("no keep-alive comment")
			}
		}
		// Events still flow between keep-alives.
		tb.rename(t, "local", s.conversationID, "renamed")
		if ev := c.next(t); ev.name != "conversationUpdated" {
			t.Fatalf("after keep-alives: %+v", ev)
		}
	})

	t.Run("ShutdownEndsTheStream", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		s := tb.send(t, "local", uuid.Nil, "hello")
		c := openSSE(t, "GET", tb.eventsURL(s.conversationID), nil, nil)
		c.next(t)
		tb.stopHub() // the client reconnects elsewhere with its last id
		c.ended(t)
	})

	t.Run("DeletedConversationEndsTheStream", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		s := tb.send(t, "local", uuid.Nil, "hello")
		c := openSSE(t, "GET", tb.eventsURL(s.conversationID), nil, nil)
		c.next(t)
		if err := tb.store.DeleteConversation(ctx, "local", s.conversationID); err != nil {
			t.Fatal(err)
		}
		c.ended(t)
		resp, cancel := get(t, "GET", tb.eventsURL(s.conversationID), http.Header{"Last-Event-ID": {"3"}}, nil)
		defer cancel()
		if code, _ := errorBody(t, resp); resp.StatusCode != http.StatusNotFound || code != "not_found" {
			t.Fatalf("reconnect to a deleted conversation: %d %s", resp.StatusCode, code)
		}
	})
}

// TestEventsRequests checks what the endpoints refuse, and how: every
// endpoint authenticates and names the field it cannot read.
func TestEventsRequests(t *testing.T) {
	t.Parallel()
	tb := setupAuth(t)
	alice, mallory := tokenFor(t, "alice"), tokenFor(t, "mallory")
	s := tb.send(t, "alice", uuid.Nil, "hello")
	events := tb.eventsURL(s.conversationID)

	for _, tc := range []struct {
		name, url string
		header    http.Header
		status    int
		code      string
		message   string // a part of it
	}{
		{"NoToken", events, nil, 401, "unauthenticated", "missing bearer token"},
		{"ForgedToken", events, bearer(alice[:len(alice)-4] + "AAAA"), 401, "unauthenticated", ""},
		{"ForgedQueryToken", events + "?access_token=" + alice[:len(alice)-4] + "AAAA", nil, 401, "unauthenticated", ""},
		{"AnotherUsersConversation", events, bearer(mallory), 404, "not_found", ""},
		{"UnknownConversation", tb.eventsURL(uuid.New()), bearer(alice), 404, "not_found", ""},
		{"MalformedID", tb.url + "/v1/conversations/42/events", bearer(alice), 400, "invalid_argument", "conversationId: \"42\" is not a UUID"},
		{"MalformedLastEventID", events, http.Header{"Authorization": {"Bearer " + alice}, "Last-Event-ID": {"x"}}, 400, "invalid_argument", "Last-Event-ID"},
		{"NegativeAfter", events + "?after=-1", bearer(alice), 400, "invalid_argument", "after"},
		{"HistoryWithoutToken", tb.url + "/v1/conversations/" + s.conversationID.String() + "/history", nil, 401, "unauthenticated", ""},
		{"HistoryOfAnotherUser", tb.url + "/v1/conversations/" + s.conversationID.String() + "/history", bearer(mallory), 404, "not_found", ""},
		{"AGUIFollowWithoutToken", tb.url + "/v1/conversations/" + s.conversationID.String() + "/agui", nil, 401, "unauthenticated", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, cancel := get(t, "GET", tc.url, tc.header, nil)
			defer cancel()
			code, message := errorBody(t, resp)
			if resp.StatusCode != tc.status || code != tc.code || !strings.Contains(message, tc.message) {
				t.Fatalf("%d %s %q; want %d %s containing %q", resp.StatusCode, code, message, tc.status, tc.code, tc.message)
			}
			if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}

	t.Run("BearerHeader", func(t *testing.T) {
		c := openSSE(t, "GET", events, bearer(alice), nil)
		if ev := c.next(t); ev.name != "snapshot" {
			t.Fatalf("first event %+v", ev)
		}
	})
	t.Run("AccessTokenForEventSource", func(t *testing.T) {
		c := openSSE(t, "GET", events+"?access_token="+alice, nil, nil)
		if ev := c.next(t); ev.name != "snapshot" {
			t.Fatalf("first event %+v", ev)
		}
	})
}
