package shares_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// testBundle is one test's server (the HTTP routes and the Connect API,
// with files and authentication) and a conversation of alice's with one
// finished exchange.
type testBundle struct {
	*apitest.Bundle
	conv  uuid.UUID
	first apitest.Sent
}

func setup(t *testing.T, opts ...apitest.Options) *testBundle {
	t.Helper()
	var o apitest.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	o.Verifier, o.Connect, o.Files = apitest.Verifier(), true, true
	tb := &testBundle{Bundle: apitest.Setup(t, o)}
	tb.first = tb.Send(t, "alice", uuid.Nil, "first question")
	tb.reply(t, tb.first.PromptID, "first answer")
	tb.conv = tb.first.ConversationID
	return tb
}

// reply writes prompt's whole reply, one text block.
func (tb *testBundle) reply(t *testing.T, prompt uuid.UUID, text string) {
	t.Helper()
	tb.StartPrompt(t, prompt)
	block := tb.StartBlock(t, prompt, "text", "{}")
	tb.AppendText(t, block, text)
	tb.EndBlock(t, block)
	tb.CompletePrompt(t, prompt)
}

// share makes a share of the conversation as alice and returns it with
// its token.
func (tb *testBundle) share(t *testing.T, mode conversation.ShareMode, expires *time.Time) (conversation.Share, string) {
	t.Helper()
	sh, token, err := tb.Store.CreateShare(context.Background(), conversation.CreateShareParams{
		CallerID: "alice", ConversationID: tb.conv, Mode: mode, ExpiresAt: expires,
	})
	if err != nil {
		t.Fatal(err)
	}
	return sh, token
}

func (tb *testBundle) revoke(t *testing.T, id uuid.UUID) {
	t.Helper()
	if _, err := tb.Store.RevokeShare(context.Background(), "alice", id); err != nil {
		t.Fatal(err)
	}
}

func (tb *testBundle) shareURL(token string) string { return tb.URL + "/v1/shares/" + token }

// get answers GET url with header, its body read.
func get(t *testing.T, url string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	resp, cancel := apitest.Do(t, http.MethodGet, url, header, nil)
	defer cancel()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// getState reads GET /v1/shares/{token}, which must answer 200.
func (tb *testBundle) getState(t *testing.T, token string, header http.Header) *convov1.GetSharedConversationResponse {
	t.Helper()
	resp, body := get(t, tb.shareURL(token), header)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET a share: %s %s", resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q", cc)
	}
	return decodeState(t, body)
}

func decodeState(t *testing.T, data []byte) *convov1.GetSharedConversationResponse {
	t.Helper()
	out := &convov1.GetSharedConversationResponse{}
	if err := protojson.Unmarshal(data, out); err != nil {
		t.Fatalf("a share's state %q: %v", data, err)
	}
	return out
}

// errorOf reads a JSON error answer with status want.
func errorOf(t *testing.T, resp *http.Response, body []byte, want int) (code, message string) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("%s %s, want %d", resp.Status, body, want)
	}
	var e struct{ Code, Message string }
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Code, e.Message
}

func lastText(st *convov1.GetSharedConversationResponse) string {
	if len(st.Messages) == 0 {
		return ""
	}
	var b strings.Builder
	for _, bl := range st.Messages[len(st.Messages)-1].Blocks {
		b.WriteString(bl.Content)
	}
	return b.String()
}

// TestShareRead: GET /v1/shares/{token} answers what the Connect API's
// GetSharedConversation does, field for field, with no Authorization,
// another user's, or one that does not verify (the header is not looked
// at); a snapshot share shows nothing written after it. Unknown, revoked
// and expired tokens are 404 with Connect's message, an empty or
// oversized token 400 naming token, on both routes; nothing changes.
func TestShareRead(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	snap, snapToken := tb.share(t, conversation.ShareSnapshot, nil)
	_, liveToken := tb.share(t, conversation.ShareLive, nil)
	second := tb.Send(t, "alice", tb.conv, "second question")
	tb.reply(t, second.PromptID, "second answer")

	anon := convov1connect.NewConversationServiceClient(http.DefaultClient, tb.URL)
	for _, c := range []struct {
		token string
		n     int
	}{{snapToken, 2}, {liveToken, 4}} {
		viaConnect, err := anon.GetSharedConversation(ctx, connect.NewRequest(&convov1.GetSharedConversationRequest{Token: c.token}))
		if err != nil {
			t.Fatal(err)
		}
		for name, h := range map[string]http.Header{
			"none":        nil,
			"bob's":       apitest.Bearer(apitest.TokenFor(t, "bob")),
			"not a token": apitest.Bearer("not-a-valid-token"),
			"the share's": apitest.Bearer(c.token),
		} {
			got := tb.getState(t, c.token, h)
			if !proto.Equal(got, viaConnect.Msg) {
				t.Errorf("Authorization %s: GET answers\n%v\nGetSharedConversation\n%v", name, got, viaConnect.Msg)
			}
			if len(got.Messages) != c.n {
				t.Errorf("Authorization %s: %d messages, want %d", name, len(got.Messages), c.n)
			}
		}
	}
	if got := tb.getState(t, snapToken, nil); lastText(got) != "first answer" || got.Share.GetId() != snap.ID.String() {
		t.Fatalf("the snapshot share: %v", got)
	}

	before := tb.State(t, "alice", tb.conv)
	expired, expiredToken := tb.share(t, conversation.ShareLive, nil)
	if _, err := tb.Pool.Exec(ctx, `UPDATE convo.shares SET expires_at = now() - interval '1 second' WHERE id = $1`, expired.ID); err != nil {
		t.Fatal(err)
	}
	tb.revoke(t, snap.ID)
	_, connectErr := anon.GetSharedConversation(ctx, connect.NewRequest(&convov1.GetSharedConversationRequest{Token: "unknown"}))
	if connect.CodeOf(connectErr) != connect.CodeNotFound {
		t.Fatalf("Connect, an unknown token: %v", connectErr)
	}
	for name, token := range map[string]string{"revoked": snapToken, "expired": expiredToken, "unknown": "unknown"} {
		for _, suffix := range []string{"", "/events"} {
			resp, body := get(t, tb.shareURL(token)+suffix, apitest.Bearer(apitest.TokenFor(t, "alice")))
			code, msg := errorOf(t, resp, body, http.StatusNotFound)
			if want := connectErr.(*connect.Error).Message(); code != "not_found" || msg != want || msg != "share does not exist" {
				t.Errorf("%s token, %q: %s %q, want not_found %q as Connect's", name, suffix, code, msg, want)
			}
		}
	}
	for name, url := range map[string]string{
		"empty":          tb.URL + "/v1/shares/",
		"129 bytes":      tb.shareURL(strings.Repeat("a", 129)),
		"129 bytes, SSE": tb.shareURL(strings.Repeat("a", 129)) + "/events",
	} {
		resp, body := get(t, url, nil)
		code, msg := errorOf(t, resp, body, http.StatusBadRequest)
		if code != "invalid_argument" || !strings.HasPrefix(msg, "token") {
			t.Errorf("%s token: %s %q, want invalid_argument naming token", name, code, msg)
		}
	}
	if after := tb.State(t, "alice", tb.conv); after.Seq != before.Seq+2 {
		// The expired share's shareCreated and the revocation's
		// shareRevoked: the reads wrote nothing.
		t.Fatalf("seq %d → %d: the reads changed the conversation", before.Seq, after.Seq)
	}
}

// stateStream reads a share's SSE stream: every event must be a
// "state" (or, at its end, an "error"), without an id.
type stateStream struct{ *apitest.SSEClient }

func (tb *testBundle) openStates(t *testing.T, token string, header http.Header) stateStream {
	t.Helper()
	c := apitest.OpenSSE(t, http.MethodGet, tb.shareURL(token)+"/events", header, nil)
	if ct := c.Resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	return stateStream{c}
}

// next returns the next state, failing on any other event.
func (s stateStream) next(t *testing.T) *convov1.GetSharedConversationResponse {
	t.Helper()
	ev := s.Next(t)
	if ev.Name != "state" || ev.HasID {
		t.Fatalf("an event %q (id %q), want a state without id: %s", ev.Name, ev.ID, ev.Data)
	}
	return decodeState(t, []byte(ev.Data))
}

// until reads states until one satisfies ok.
func (s stateStream) until(t *testing.T, what string, ok func(*convov1.GetSharedConversationResponse) bool) *convov1.GetSharedConversationResponse {
	t.Helper()
	deadline := time.Now().Add(apitest.WaitTimeout)
	for time.Now().Before(deadline) {
		if st := s.next(t); ok(st) {
			return st
		}
	}
	t.Fatalf("no state %s", what)
	return nil
}

// endsNotFound reads the stream's "error" event, which must be
// not_found "share does not exist", then its end, within d.
func (s stateStream) endsNotFound(t *testing.T, d time.Duration, what string) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-s.Events:
			if ev.Name == "state" {
				continue // a state sent before the end
			}
			var e struct{ Code, Message string }
			if ev.Name != "error" || json.Unmarshal([]byte(ev.Data), &e) != nil || e.Code != "not_found" || e.Message != "share does not exist" {
				t.Fatalf("%s: event %q %s, want error not_found", what, ev.Name, ev.Data)
			}
			s.Ended(t)
			return
		case <-deadline:
			t.Fatalf("%s: no error event within %s", what, d)
		}
	}
}

// TestShareEvents: GET /v1/shares/{token}/events sends the state now,
// then a live share's state again as a reply streams (its text so far),
// at most one every 200 ms; a snapshot share's stream sends nothing
// more. Revoking the live share ends its stream within a second with an
// error event not_found, and a reconnect is 404; another user's
// Authorization changes nothing.
func TestShareEvents(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	live, liveToken := tb.share(t, conversation.ShareLive, nil)
	snap, snapToken := tb.share(t, conversation.ShareSnapshot, nil)
	onLive := tb.openStates(t, liveToken, apitest.Bearer(apitest.TokenFor(t, "bob")))
	onSnap := tb.openStates(t, snapToken, nil)
	for _, s := range []stateStream{onLive, onSnap} {
		if st := s.next(t); len(st.Messages) != 2 || lastText(st) != "first answer" {
			t.Fatalf("the first state: %v", st)
		}
	}

	next := tb.Send(t, "alice", tb.conv, "more")
	tb.StartPrompt(t, next.PromptID)
	block := tb.StartBlock(t, next.PromptID, "text", "{}")
	start := time.Now()
	var want string
	for i := range 20 {
		delta := fmt.Sprintf("delta %d. ", i)
		tb.AppendText(t, block, delta)
		want += delta
	}
	var states int
	st := onLive.until(t, "with the reply so far", func(st *convov1.GetSharedConversationResponse) bool {
		states++
		return len(st.Messages) == 4 && lastText(st) == want
	})
	if st.Messages[3].Status != "processing" {
		t.Errorf("the reply in flight is %q", st.Messages[3].Status)
	}
	// 23 events (the send's, the start's, the block's and 20 deltas) come
	// as a few states: one per 200 ms at most.
	if most := int(time.Since(start)/(200*time.Millisecond)) + 2; states > most {
		t.Errorf("%d states in %s: more than one per 200 ms", states, time.Since(start))
	}
	tb.EndBlock(t, block)
	tb.CompletePrompt(t, next.PromptID)
	onLive.until(t, "with the reply completed", func(st *convov1.GetSharedConversationResponse) bool {
		return len(st.Messages) == 4 && st.Messages[3].Status == "completed"
	})

	tb.revoke(t, live.ID)
	onLive.endsNotFound(t, time.Second, "the revoked live share")
	resp, body := get(t, tb.shareURL(liveToken)+"/events", nil)
	errorOf(t, resp, body, http.StatusNotFound)
	select {
	case ev := <-onSnap.Events:
		t.Fatalf("the snapshot share's stream sent %q: %s", ev.Name, ev.Data)
	case <-onSnap.Done:
		t.Fatalf("the snapshot share's stream ended: %v", onSnap.Err)
	default:
	}
	tb.revoke(t, snap.ID)
	onSnap.endsNotFound(t, time.Second, "the revoked snapshot share")
}

// TestShareEventsExpire: a share's stream ends at the share's expiry
// with the error event, though no event marks it; a silent stream gets
// keep-alive comments meanwhile.
func TestShareEventsExpire(t *testing.T) {
	t.Parallel()
	tb := setup(t, apitest.Options{KeepAlive: 200 * time.Millisecond})
	expires := time.Now().Add(2 * time.Second)
	_, token := tb.share(t, conversation.ShareLive, &expires)
	s := tb.openStates(t, token, nil)
	s.next(t)
	select {
	case c := <-s.Comments:
		if c != "keep-alive" {
			t.Fatalf("comment %q", c)
		}
	case <-time.After(apitest.WaitTimeout):
		t.Fatal("no keep-alive comment")
	}
	s.endsNotFound(t, apitest.WaitTimeout, "the expired share")
	if time.Now().Before(expires) {
		t.Fatal("the stream ended before the share expired")
	}
	resp, body := get(t, tb.shareURL(token), nil)
	errorOf(t, resp, body, http.StatusNotFound)
}

// TestShareEventsKeepAliveWhileBusy: a snapshot share's stream sends
// nothing after its first state, however busy its conversation; it still
// gets keep-alive comments, counted from its last write, not from the
// conversation's last event: a delta every 50 ms or so here, and a
// keep-alive (300 ms) that comes sooner than 300 ms after the last delta
// could not have been counted from it.
func TestShareEventsKeepAliveWhileBusy(t *testing.T) {
	t.Parallel()
	const keepAlive = 300 * time.Millisecond
	tb := setup(t, apitest.Options{KeepAlive: keepAlive})
	_, token := tb.share(t, conversation.ShareSnapshot, nil)
	s := tb.openStates(t, token, nil)
	s.next(t)
	next := tb.Send(t, "alice", tb.conv, "more")
	tb.StartPrompt(t, next.PromptID)
	block := tb.StartBlock(t, next.PromptID, "text", "{}")
	deadline := time.Now().Add(apitest.WaitTimeout)
	for i := 0; ; i++ {
		tb.AppendText(t, block, fmt.Sprintf("delta %d. ", i))
		appended := time.Now()
		select {
		case c := <-s.Comments:
			if c != "keep-alive" {
				t.Fatalf("comment %q", c)
			}
			if time.Since(appended) < keepAlive {
				return
			}
			// A loaded machine paused the deltas for longer than the
			// keep-alive: this one proves nothing; wait for another.
		case ev := <-s.Events:
			t.Fatalf("the snapshot share's stream sent %q: %s", ev.Name, ev.Data)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no keep-alive comment in %d deltas", i)
		}
	}
}

// TestShareFiles: a file in a shared conversation shows to its readers
// with a signed URL, as it does to the owner, on every read of a share
// (GET, the SSE stream, Connect's GetSharedConversation and
// StreamSharedConversation); the URL, with no Authorization, downloads
// the bytes.
func TestShareFiles(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	png := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde"),
		bytes.Repeat([]byte("pixels"), 100)...)
	f, err := tb.Files.Upload(ctx, "alice", "pic.png", "image/png", bytes.NewReader(png))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: "alice", ConversationID: tb.conv, Text: "look", FileIDs: []uuid.UUID{f.ID},
		ModelConfigs: []json.RawMessage{json.RawMessage("{}")},
	}); err != nil {
		t.Fatal(err)
	}
	_, token := tb.share(t, conversation.ShareLive, nil)

	anon := convov1connect.NewConversationServiceClient(http.DefaultClient, tb.URL)
	viaConnect, err := anon.GetSharedConversation(ctx, connect.NewRequest(&convov1.GetSharedConversationRequest{Token: token}))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := anon.StreamSharedConversation(ctx, connect.NewRequest(&convov1.StreamSharedConversationRequest{Token: token}))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if !cs.Receive() {
		t.Fatalf("StreamSharedConversation: %v", cs.Err())
	}
	states := map[string]*convov1.GetSharedConversationResponse{
		"GET":                      tb.getState(t, token, nil),
		"SSE":                      tb.openStates(t, token, nil).next(t),
		"GetSharedConversation":    viaConnect.Msg,
		"StreamSharedConversation": cs.Msg().State,
	}
	for name, st := range states {
		var file *convov1.File
		for _, m := range st.Messages {
			for _, b := range m.Blocks {
				if b.GetFile() != nil {
					file = b.GetFile()
				}
			}
		}
		if file == nil || file.Id != f.ID.String() || file.Url == "" || file.UrlExpiresAt == nil {
			t.Fatalf("%s: the file block's file is %v, want a signed URL", name, file)
		}
		if !file.UrlExpiresAt.AsTime().After(time.Now()) {
			t.Errorf("%s: the URL expires at %v", name, file.UrlExpiresAt.AsTime())
		}
		resp, body := get(t, tb.URL+file.Url, nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, png) {
			t.Fatalf("%s: GET %s: %s, %d bytes, want the file's %d", name, file.Url, resp.Status, len(body), len(png))
		}
	}
}
