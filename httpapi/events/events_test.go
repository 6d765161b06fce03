package events_test

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

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
	"github.com/convo-dev/convo/internal/pgtest"
)

func TestEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SnapshotThenEventsWithIDs", func(t *testing.T) {
		t.Parallel()
		tb := apitest.Setup(t)
		s := tb.Send(t, "local", uuid.Nil, "hello")
		c := apitest.OpenSSE(t, "GET", tb.EventsURL(s.ConversationID), nil, nil)
		h := c.Resp.Header
		if h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache" || h.Get("X-Accel-Buffering") != "no" {
			t.Errorf("headers = %v", h)
		}
		select {
		case r := <-c.Retry:
			if r != "2000" {
				t.Errorf("retry: %s, want 2000", r)
			}
		case <-time.After(apitest.WaitTimeout):
			t.Fatal("no retry field")
		}

		first := c.Next(t)
		snap := &convov1.Snapshot{}
		if err := protojson.Unmarshal([]byte(first.Data), snap); err != nil || first.Name != "snapshot" {
			t.Fatalf("first event %+v: %v", first, err)
		}
		st := tb.State(t, "local", s.ConversationID)
		if first.ID != strconv.FormatInt(st.Seq, 10) || snap.Seq != st.Seq || len(snap.Messages) != 2 ||
			snap.Messages[0].Blocks[0].Content != "hello" {
			t.Fatalf("snapshot id %q = %v; want the state at seq %d", first.ID, snap, st.Seq)
		}

		tb.StartPrompt(t, s.PromptID)
		block := tb.StartBlock(t, s.PromptID, "text", "{}")
		tb.AppendText(t, block, "Hi", " there")
		tb.CompletePrompt(t, s.PromptID)
		var names []string
		for seq := st.Seq + 1; ; seq++ {
			ev := c.Next(t)
			if !ev.HasID || ev.ID != strconv.FormatInt(seq, 10) {
				t.Fatalf("event %+v; want id %d", ev, seq)
			}
			e := apitest.DecodeEvent(t, ev)
			names = append(names, ev.Name)
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
		tb := apitest.Setup(t)
		s := tb.Send(t, "local", uuid.Nil, "hello")
		tb.StartPrompt(t, s.PromptID)
		block := tb.StartBlock(t, s.PromptID, "text", "{}")
		tb.AppendText(t, block, "Hello, ", "wor")
		seq := tb.State(t, "local", s.ConversationID).Seq

		c := apitest.OpenSSE(t, "GET", tb.EventsURL(s.ConversationID), nil, nil)
		// Only the unit's last event carries an id: a client cut off
		// inside it never resumes from half a state.
		snap, start, delta := c.Next(t), c.Next(t), c.Next(t)
		if snap.Name != "snapshot" || snap.HasID || start.Name != "blockStart" || start.HasID {
			t.Fatalf("unit starts %+v, %+v; want the snapshot and the replayed blockStart without ids", snap, start)
		}
		d := apitest.DecodeEvent(t, delta)
		if delta.ID != strconv.FormatInt(seq, 10) || !d.Replay || d.GetBlockDelta().GetContent() != "Hello, wor" {
			t.Fatalf("replayed delta %+v; want the text so far with id %d", delta, seq)
		}
		tb.AppendText(t, block, "ld!")
		if got := apitest.DecodeEvent(t, c.Next(t)).GetBlockDelta().GetContent(); got != "ld!" {
			t.Fatalf("next delta %q", got)
		}
	})

	t.Run("ResumesAfterLastEventID", func(t *testing.T) {
		t.Parallel()
		tb := apitest.Setup(t)
		s := tb.Send(t, "local", uuid.Nil, "hello")
		tb.StartPrompt(t, s.PromptID)
		block := tb.StartBlock(t, s.PromptID, "text", "{}")
		tb.AppendText(t, block, "one", "two", "three")
		last := tb.State(t, "local", s.ConversationID).Seq

		for name, req := range map[string]struct {
			url    string
			header http.Header
		}{
			"LastEventID": {tb.EventsURL(s.ConversationID), http.Header{"Last-Event-ID": {strconv.FormatInt(last-2, 10)}}},
			"AfterQuery":  {tb.EventsURL(s.ConversationID) + "?after=" + strconv.FormatInt(last-2, 10), nil},
			// EventSource reconnects to the same URL with the newer id.
			"HeaderWins": {tb.EventsURL(s.ConversationID) + "?after=1", http.Header{"Last-Event-ID": {strconv.FormatInt(last-2, 10)}}},
		} {
			t.Run(name, func(t *testing.T) {
				c := apitest.OpenSSE(t, "GET", req.url, req.header, nil)
				for _, want := range []string{"two", "three"} {
					ev := c.Next(t)
					if got := apitest.DecodeEvent(t, ev).GetBlockDelta().GetContent(); got != want || ev.Name == "snapshot" {
						t.Fatalf("resumed with %+v; want the delta %q", ev, want)
					}
				}
				c.Close()
			})
		}
	})

	t.Run("DropAndResumeLosesAndRepeatsNothing", func(t *testing.T) {
		t.Parallel()
		tb := apitest.Setup(t)
		s := tb.Send(t, "local", uuid.Nil, "hello")
		tb.StartPrompt(t, s.PromptID)
		block := tb.StartBlock(t, s.PromptID, "text", "{}")
		var want strings.Builder
		write := func(from, to int) {
			for i := from; i < to; i++ {
				d := fmt.Sprintf("[%d]", i)
				want.WriteString(d)
				tb.AppendText(t, block, d)
			}
		}

		// A client reads, its connection drops, it reconnects with the
		// last id it saw, three times over, while the reply goes on.
		var got strings.Builder
		var seqs []int64
		lastID := ""
		read := func(c *apitest.SSEClient, until string) {
			for {
				ev := c.Next(t)
				if ev.Name == "snapshot" {
					continue
				}
				e := apitest.DecodeEvent(t, ev)
				seqs = append(seqs, e.Seq)
				got.WriteString(e.GetBlockDelta().GetContent())
				if ev.HasID {
					lastID = ev.ID
				}
				if strings.HasSuffix(got.String(), until) || e.GetPromptCompleted() != nil {
					return
				}
			}
		}
		c := apitest.OpenSSE(t, "GET", tb.EventsURL(s.ConversationID), nil, nil)
		write(0, 10)
		read(c, "[9]")
		for round := 1; round <= 3; round++ {
			c.Close()
			write(round*10, round*10+5) // while disconnected
			c = apitest.OpenSSE(t, "GET", tb.EventsURL(s.ConversationID), http.Header{"Last-Event-ID": {lastID}}, nil)
			write(round*10+5, round*10+10)
			read(c, fmt.Sprintf("[%d]", round*10+9))
		}
		tb.CompletePrompt(t, s.PromptID)
		read(c, "\x00")

		if got.String() != want.String() {
			t.Errorf("text across reconnects:\n%s\nwant\n%s", got.String(), want.String())
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]+1 {
				t.Fatalf("seqs %v: not one after the other", seqs)
			}
		}
		if final := tb.State(t, "local", s.ConversationID); seqs[len(seqs)-1] > final.Seq {
			t.Fatalf("read up to %d, log ends at %d", seqs[len(seqs)-1], final.Seq)
		}
	})

	t.Run("KeepAliveOnIdleStream", func(t *testing.T) {
		t.Parallel()
		tb := apitest.Setup(t, apitest.Options{KeepAlive: 20 * time.Millisecond})
		s := tb.Send(t, "local", uuid.Nil, "hello")
		c := apitest.OpenSSE(t, "GET", tb.EventsURL(s.ConversationID), nil, nil)
		c.Next(t) // the snapshot
		for range 2 {
			select {
			case comment := <-c.Comments:
				if comment != "keep-alive" {
					t.Fatalf("comment %q", comment)
				}
			case <-time.After(apitest.WaitTimeout):
				t.Fatal("no keep-alive comment")
			}
		}
		// Events still flow between keep-alives.
		tb.Rename(t, "local", s.ConversationID, "renamed")
		if ev := c.Next(t); ev.Name != "conversationUpdated" {
			t.Fatalf("after keep-alives: %+v", ev)
		}
	})

	t.Run("ShutdownEndsTheStream", func(t *testing.T) {
		t.Parallel()
		tb := apitest.Setup(t)
		s := tb.Send(t, "local", uuid.Nil, "hello")
		c := apitest.OpenSSE(t, "GET", tb.EventsURL(s.ConversationID), nil, nil)
		c.Next(t)
		tb.StopHub() // the client reconnects elsewhere with its last id
		c.Ended(t)
	})

	t.Run("DeletedConversationEndsTheStream", func(t *testing.T) {
		t.Parallel()
		tb := apitest.Setup(t)
		s := tb.Send(t, "local", uuid.Nil, "hello")
		c := apitest.OpenSSE(t, "GET", tb.EventsURL(s.ConversationID), nil, nil)
		c.Next(t)
		if err := tb.Store.DeleteConversation(ctx, "local", s.ConversationID); err != nil {
			t.Fatal(err)
		}
		c.Ended(t)
		resp, cancel := apitest.Do(t, "GET", tb.EventsURL(s.ConversationID), http.Header{"Last-Event-ID": {"3"}}, nil)
		defer cancel()
		if code, _ := apitest.ErrorBody(t, resp); resp.StatusCode != http.StatusNotFound || code != "not_found" {
			t.Fatalf("reconnect to a deleted conversation: %d %s", resp.StatusCode, code)
		}
	})
}

// TestEventsRequests checks what the endpoints refuse, and how: every
// endpoint authenticates and names the field it cannot read.
func TestEventsRequests(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	alice, mallory := apitest.TokenFor(t, "alice"), apitest.TokenFor(t, "mallory")
	s := tb.Send(t, "alice", uuid.Nil, "hello")
	events := tb.EventsURL(s.ConversationID)

	for _, tc := range []struct {
		name, url string
		header    http.Header
		status    int
		code      string
		message   string // a part of it
	}{
		{"NoToken", events, nil, 401, "unauthenticated", "missing bearer token"},
		{"ForgedToken", events, apitest.Bearer(alice[:len(alice)-4] + "AAAA"), 401, "unauthenticated", ""},
		{"ForgedQueryToken", events + "?access_token=" + alice[:len(alice)-4] + "AAAA", nil, 401, "unauthenticated", ""},
		{"AnotherUsersConversation", events, apitest.Bearer(mallory), 404, "not_found", ""},
		{"UnknownConversation", tb.EventsURL(uuid.New()), apitest.Bearer(alice), 404, "not_found", ""},
		{"MalformedID", tb.URL + "/v1/conversations/42/events", apitest.Bearer(alice), 400, "invalid_argument", "conversationId: \"42\" is not a UUID"},
		{"MalformedLastEventID", events, http.Header{"Authorization": {"Bearer " + alice}, "Last-Event-ID": {"x"}}, 400, "invalid_argument", "Last-Event-ID"},
		{"NegativeAfter", events + "?after=-1", apitest.Bearer(alice), 400, "invalid_argument", "after"},
		{"HistoryWithoutToken", tb.URL + "/v1/conversations/" + s.ConversationID.String() + "/history", nil, 401, "unauthenticated", ""},
		{"HistoryOfAnotherUser", tb.URL + "/v1/conversations/" + s.ConversationID.String() + "/history", apitest.Bearer(mallory), 404, "not_found", ""},
		{"AGUIFollowWithoutToken", tb.URL + "/v1/conversations/" + s.ConversationID.String() + "/agui", nil, 401, "unauthenticated", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, cancel := apitest.Do(t, "GET", tc.url, tc.header, nil)
			defer cancel()
			code, message := apitest.ErrorBody(t, resp)
			if resp.StatusCode != tc.status || code != tc.code || !strings.Contains(message, tc.message) {
				t.Fatalf("%d %s %q; want %d %s containing %q", resp.StatusCode, code, message, tc.status, tc.code, tc.message)
			}
			if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}

	t.Run("BearerHeader", func(t *testing.T) {
		c := apitest.OpenSSE(t, "GET", events, apitest.Bearer(alice), nil)
		if ev := c.Next(t); ev.Name != "snapshot" {
			t.Fatalf("first event %+v", ev)
		}
	})
	t.Run("AccessTokenForEventSource", func(t *testing.T) {
		c := apitest.OpenSSE(t, "GET", events+"?access_token="+alice, nil, nil)
		if ev := c.Next(t); ev.Name != "snapshot" {
			t.Fatalf("first event %+v", ev)
		}
	})
}

// TestPauseEventsOnlyWhenAsked: the SSE stream sends the events of a
// pause only with ?include_pause_events=true; without it, a messageUpdated
// of the same seq (and id) in place of each. Likewise the snapshot's
// pending input requests.
func TestPauseEventsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := apitest.Setup(t)
	s := tb.Send(t, "local", uuid.Nil, "send a mail")
	plain := apitest.OpenSSE(t, "GET", tb.EventsURL(s.ConversationID), nil, nil)
	asked := apitest.OpenSSE(t, "GET", tb.EventsURL(s.ConversationID)+"?include_pause_events=true", nil, nil)
	for _, c := range []*apitest.SSEClient{plain, asked} {
		if first := c.Next(t); first.Name != "snapshot" {
			t.Fatalf("first event %+v, want the snapshot", first)
		}
	}
	_, call, err := pgtest.PauseForApproval(ctx, tb.Pool, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Pool.Exec(ctx, `SELECT convo.answer_input('local', $1, '{"approved": false, "reason": "not now"}')`, call); err != nil {
		t.Fatal(err)
	}
	last := tb.State(t, "local", s.ConversationID).Seq
	names := func(c *apitest.SSEClient) map[string]int {
		got := map[string]int{}
		for seq := int64(-1); seq < last; {
			ev := c.Next(t)
			n, err := strconv.ParseInt(ev.ID, 10, 64)
			if err != nil || (seq >= 0 && n != seq+1) {
				t.Fatalf("event %+v after seq %d", ev, seq)
			}
			seq = n
			got[ev.Name]++
		}
		return got
	}
	if got := names(asked); got["inputRequested"] != 1 || got["promptWaiting"] != 1 || got["inputAnswered"] != 1 {
		t.Errorf("asked for pause events, got %v", got)
	}
	got := names(plain)
	if got["inputRequested"]+got["promptWaiting"]+got["inputAnswered"] != 0 || got["messageUpdated"] < 3 {
		t.Errorf("did not ask for pause events, got %v", got)
	}
	// A late joiner's snapshot carries the open request (answered, not
	// yet acted on by a worker) only when it asks.
	for _, pauses := range []bool{false, true} {
		url := tb.EventsURL(s.ConversationID)
		if pauses {
			url += "?include_pause_events=true"
		}
		first := apitest.OpenSSE(t, "GET", url, nil, nil).Next(t)
		snap := &convov1.Snapshot{}
		if err := protojson.Unmarshal([]byte(first.Data), snap); err != nil || first.Name != "snapshot" {
			t.Fatalf("first event %+v: %v", first, err)
		}
		if n := len(snap.PendingInputs); (n != 0) != pauses || (pauses && (snap.PendingInputs[0].ToolCallId != call ||
			snap.PendingInputs[0].Status != "answered" || snap.PendingInputs[0].Answer.Fields["reason"].GetStringValue() != "not now")) {
			t.Errorf("include_pause_events=%v: snapshot's pending inputs %v", pauses, snap.PendingInputs)
		}
		if !pauses && strings.Contains(first.Data, "pendingInputs") {
			t.Errorf("snapshot without include_pause_events: %s", first.Data)
		}
	}
	resp, cancel := apitest.Do(t, "GET", tb.EventsURL(s.ConversationID)+"?include_pause_events=maybe", nil, nil)
	defer cancel()
	if code, msg := apitest.ErrorBody(t, resp); resp.StatusCode != http.StatusBadRequest || code != "invalid_argument" || !strings.Contains(msg, "include_pause_events") {
		t.Errorf("include_pause_events=maybe: %d %s %q, want 400 naming the parameter", resp.StatusCode, code, msg)
	}
}

// TestBranchesOnlyWhenAsked: the SSE stream sends branchSwitched only with
// ?include_branches=true; without it the stream ends before the event,
// and EventSource's reconnect (Last-Event-ID: the last id it got) starts
// from a snapshot of the new path.
func TestBranchesOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := apitest.Setup(t)
	s := tb.Send(t, "local", uuid.Nil, "tell me")
	tb.StartPrompt(t, s.PromptID)
	tb.AppendText(t, tb.StartBlock(t, s.PromptID, "text", "{}"), "a story")
	tb.CompletePrompt(t, s.PromptID)
	plain := apitest.OpenSSE(t, "GET", tb.EventsURL(s.ConversationID), nil, nil)
	asked := apitest.OpenSSE(t, "GET", tb.EventsURL(s.ConversationID)+"?include_branches=true", nil, nil)
	for _, c := range []*apitest.SSEClient{plain, asked} {
		if first := c.Next(t); first.Name != "snapshot" {
			t.Fatalf("first event %+v, want the snapshot", first)
		}
	}
	before := tb.State(t, "local", s.ConversationID).Seq
	re, err := tb.Store.RegenerateReply(ctx, conversation.RegenerateParams{OwnerID: "local", ConversationID: s.ConversationID})
	if err != nil {
		t.Fatal(err)
	}
	if ev := asked.Next(t); ev.Name != "branchSwitched" || ev.ID != strconv.FormatInt(before+1, 10) ||
		!strings.Contains(ev.Data, re.MessageID.String()) {
		t.Errorf("asked for branches: %+v; want branchSwitched %d with the new reply", ev, before+1)
	}
	select {
	case ev := <-plain.Events:
		t.Errorf("did not ask for branches, got %+v; want the stream to end", ev)
	case <-plain.Done:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream that did not ask for branches did not end")
	}
	// The reconnect: after the last id it got, before the switch.
	again := apitest.OpenSSE(t, "GET", tb.EventsURL(s.ConversationID), http.Header{"Last-Event-ID": {strconv.FormatInt(before, 10)}}, nil)
	first := again.Next(t)
	snap := &convov1.Snapshot{}
	if err := protojson.Unmarshal([]byte(first.Data), snap); err != nil || first.Name != "snapshot" {
		t.Fatalf("resumed before the switch: %+v (%v); want a snapshot", first, err)
	}
	if n := len(snap.Messages); n != 2 || snap.Messages[1].Id != re.MessageID.String() || snap.Messages[1].SiblingCount != 2 {
		t.Errorf("the snapshot after the switch: %v; want the user's message and the new reply, version 2 of 2", snap.Messages)
	}
	resp, cancel := apitest.Do(t, "GET", tb.EventsURL(s.ConversationID)+"?include_branches=maybe", nil, nil)
	defer cancel()
	if code, msg := apitest.ErrorBody(t, resp); resp.StatusCode != http.StatusBadRequest || code != "invalid_argument" || !strings.Contains(msg, "include_branches") {
		t.Errorf("include_branches=maybe: %d %s %q, want 400 naming the parameter", resp.StatusCode, code, msg)
	}
}
