package connectapi_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/auth"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/presence"
)

// presenceServers serves one database from two servers, A and B, each with
// its own hub, feed, listener and presence tracker, tokens required.
func presenceServers(t *testing.T, feed string, opts presence.Options) (a, b *testBundle) {
	t.Helper()
	a = setup(t, setupOptions{verifier: auth.NewHS256(testSecret), feed: feed, presence: &opts})
	b = setup(t, setupOptions{verifier: auth.NewHS256(testSecret), feed: feed, presence: &opts, dsn: a.dsn})
	return a, b
}

// createAs creates a conversation for the caller of client.
func createAs(t testing.TB, client convov1connect.ConversationServiceClient) string {
	t.Helper()
	res, err := client.CreateConversation(context.Background(), connect.NewRequest(&convov1.CreateConversationRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg.Conversation.Id
}

// presenceOf returns the users of the last Presence sub received, and
// whether it received one.
func presenceOf(sub *subscriber) ([]*convov1.PresentUser, bool) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for _, m := range slices.Backward(sub.received) {
		if p := m.GetPresence(); p != nil {
			return p.Users, true
		}
	}
	return nil, false
}

// describe renders users as "alice:viewing,typing bob:viewing".
func describe(users []*convov1.PresentUser) string {
	out := ""
	for _, u := range users {
		if out != "" {
			out += " "
		}
		out += u.UserId + ":"
		switch {
		case u.Viewing && u.Typing:
			out += "viewing,typing"
		case u.Viewing:
			out += "viewing"
		case u.Typing:
			out += "typing"
		}
	}
	return out
}

// waitPresence waits until sub's latest Presence reads want, and returns
// how long it took.
func waitPresence(t testing.TB, sub *subscriber, want string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(timeout)
	for {
		users, ok := presenceOf(sub)
		if ok && describe(users) == want {
			return time.Since(start)
		}
		sub.mu.Lock()
		err := sub.err
		sub.mu.Unlock()
		if err != nil {
			t.Fatalf("stream ended waiting for presence %q: %v", want, err)
		}
		select {
		case <-sub.changed:
		case <-deadline:
			t.Fatalf("presence is %q (received one: %v), want %q within %v", describe(users), ok, want, timeout)
		}
	}
}

// TestPresenceAcrossServers: a stream on server A that asked for presence
// gets the list right after its snapshot, sees the caller typing on server
// B within 500 ms, sees the typing end when B says so and when its report
// expires, and sees a viewer another server announced vanish when that
// server stops repeating it (a crash).
func TestPresenceAcrossServers(t *testing.T) {
	forEachFeed(t, func(t *testing.T, feed string) {
		a, b := presenceServers(t, feed, presence.Options{TypingTTL: time.Second, ViewerTTL: time.Second})
		alice := tokenFor(t, "alice")
		id := createAs(t, a.clientAs(alice))

		viewer := subscribe(t, a.clientAs(alice), &convov1.StreamConversationRequest{ConversationId: id, IncludePresence: true})
		got := waitReceived(t, viewer, 2)
		if got[0].GetSnapshot() == nil || got[1].GetPresence() == nil {
			t.Fatalf("want the snapshot then a presence, got %v then %v", got[0], got[1])
		}
		waitPresence(t, viewer, "alice:viewing", streamTimeout)

		typist := b.clientAs(alice)
		if _, err := typist.SetTyping(context.Background(), connect.NewRequest(&convov1.SetTypingRequest{ConversationId: id, Typing: true})); err != nil {
			t.Fatal(err)
		}
		took := waitPresence(t, viewer, "alice:viewing,typing", 500*time.Millisecond)
		t.Logf("typing on B reached A's stream in %v", took)
		if _, err := typist.SetTyping(context.Background(), connect.NewRequest(&convov1.SetTypingRequest{ConversationId: id, Typing: false})); err != nil {
			t.Fatal(err)
		}
		waitPresence(t, viewer, "alice:viewing", streamTimeout)

		// A report that is not renewed expires (TypingTTL 1 s here).
		if _, err := typist.SetTyping(context.Background(), connect.NewRequest(&convov1.SetTypingRequest{ConversationId: id, Typing: true})); err != nil {
			t.Fatal(err)
		}
		waitPresence(t, viewer, "alice:viewing,typing", streamTimeout)
		start := time.Now()
		waitPresence(t, viewer, "alice:viewing", 5*time.Second)
		if d := time.Since(start); d < 500*time.Millisecond {
			t.Fatalf("typing ended %v after it was seen, before its TTL of 1 s", d)
		}

		// Another server's viewer (a server that then crashes: it never
		// takes it back) is shown, then forgotten after ViewerTTL.
		notifyPresence(t, a, fmt.Sprintf("1 crashed\nv %s zed", id))
		waitPresence(t, viewer, "alice:viewing zed:viewing", streamTimeout)
		waitPresence(t, viewer, "alice:viewing", 5*time.Second)
	})
}

// notifyPresence sends a payload on the presence channel, as another
// server would.
func notifyPresence(t testing.TB, tb *testBundle, payload string) {
	t.Helper()
	if _, err := tb.pool.Exec(context.Background(), "SELECT pg_notify('convo_presence', $1)", payload); err != nil {
		t.Fatal(err)
	}
}

// TestPresenceViewerLeaves: a stream with presence on server B announces
// its caller to the other servers when it opens and takes them back the
// moment it closes; server A shows another server's viewer until it is
// taken back.
func TestPresenceViewerLeaves(t *testing.T) {
	forEachFeed(t, func(t *testing.T, feed string) {
		a, b := presenceServers(t, feed, presence.Options{})
		alice := tokenFor(t, "alice")
		id := createAs(t, a.clientAs(alice))

		// What B tells the other servers, heard as they hear it.
		records := listenPresence(t, a.dsn)
		onB := subscribe(t, b.clientAs(alice), &convov1.StreamConversationRequest{ConversationId: id, IncludePresence: true})
		want := fmt.Sprintf("v %s alice", id)
		waitRecord(t, records, want)
		onB.close()
		waitRecord(t, records, fmt.Sprintf("l %s alice", id))

		// A shows a viewer of another server until it is taken back.
		viewer := subscribe(t, a.clientAs(alice), &convov1.StreamConversationRequest{ConversationId: id, IncludePresence: true})
		notifyPresence(t, a, fmt.Sprintf("1 other\nv %s bob", id))
		waitPresence(t, viewer, "alice:viewing bob:viewing", streamTimeout)
		notifyPresence(t, a, fmt.Sprintf("1 other\nl %s bob", id))
		waitPresence(t, viewer, "alice:viewing", streamTimeout)
		// B knows alice views on A.
		b.waitList(t, id, "alice:viewing")
	})
}

// listenPresence returns the records heard on the presence channel, each
// as "<kind> <conversation> <user>".
func listenPresence(t testing.TB, dsn string) <-chan string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), "LISTEN convo_presence"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan string, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				return
			}
			_, rest, _ := cutLine(n.Payload)
			for rest != "" {
				var line string
				line, rest, _ = cutLine(rest)
				select {
				case out <- line:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		conn.Close(context.Background())
	})
	return out
}

func cutLine(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// waitRecord waits for the record want, skipping others.
func waitRecord(t testing.TB, records <-chan string, want string) {
	t.Helper()
	deadline := time.After(streamTimeout)
	for {
		select {
		case r := <-records:
			if r == want {
				return
			}
		case <-deadline:
			t.Fatalf("no record %q within %v", want, streamTimeout)
		}
	}
}

// TestPresenceOnlyWhenAsked: a stream that did not ask include_presence
// gets no Presence, whatever happens, and does not count as viewing.
func TestPresenceOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOptions{verifier: auth.NewHS256(testSecret), presence: &presence.Options{}})
	client := tb.clientAs(tokenFor(t, "alice"))
	id := createAs(t, client)
	plain := subscribe(t, client, &convov1.StreamConversationRequest{ConversationId: id})
	if _, err := client.SetTyping(context.Background(), connect.NewRequest(&convov1.SetTypingRequest{ConversationId: id, Typing: true})); err != nil {
		t.Fatal(err)
	}
	asking := subscribe(t, client, &convov1.StreamConversationRequest{ConversationId: id, IncludePresence: true})
	// alice is typing but, with only a stream that did not ask, viewing
	// nowhere until the asking stream opened.
	waitPresence(t, asking, "alice:viewing,typing", streamTimeout)
	// An event after the typing report: the plain stream's next message
	// is that event, and it never got a presence.
	if _, err := client.RenameConversation(context.Background(), connect.NewRequest(&convov1.RenameConversationRequest{ConversationId: id, Title: "renamed"})); err != nil {
		t.Fatal(err)
	}
	got := waitReceived(t, plain, 2)
	for _, m := range got {
		if m.GetPresence() != nil {
			t.Fatalf("a stream without include_presence got %v", m)
		}
	}
	asking.close()
	tb.waitList(t, id, "alice:typing")
}

// waitList waits until the server's own list of conversation id reads
// want (as describe renders it).
func (tb *testBundle) waitList(t testing.TB, id, want string) {
	t.Helper()
	for deadline := time.Now().Add(streamTimeout); ; time.Sleep(5 * time.Millisecond) {
		var users []*convov1.PresentUser
		for _, e := range tb.presence.Current(uuid.MustParse(id)) {
			users = append(users, &convov1.PresentUser{UserId: e.UserID, Viewing: e.Viewing, Typing: e.Typing})
		}
		if describe(users) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's list is %q, want %q", describe(users), want)
		}
	}
}

// TestSetTypingRateLimit: past its burst a user's typing reports are
// refused ResourceExhausted with a Retry-After; another user's are not.
func TestSetTypingRateLimit(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOptions{verifier: auth.NewHS256(testSecret), presence: &presence.Options{}})
	alice, bob := tb.clientAs(tokenFor(t, "alice")), tb.clientAs(tokenFor(t, "bob"))
	id, bobs := createAs(t, alice), createAs(t, bob)
	req := connect.NewRequest(&convov1.SetTypingRequest{ConversationId: id, Typing: true})
	var err error
	n := 0
	for ; n < 50; n++ {
		if _, err = alice.SetTyping(context.Background(), req); err != nil {
			break
		}
	}
	ce := requireCode(t, err, connect.CodeResourceExhausted)
	if n < 5 || n > 6 {
		t.Fatalf("refused after %d reports, want after the burst of 5", n)
	}
	if ce.Meta().Get("Retry-After") == "" {
		t.Fatal("no Retry-After on the refusal")
	}
	if _, err := bob.SetTyping(context.Background(), connect.NewRequest(&convov1.SetTypingRequest{ConversationId: bobs, Typing: true})); err != nil {
		t.Fatalf("bob was limited by alice's reports: %v", err)
	}
}

// TestPresenceStranger: someone who may not read a conversation can
// neither report typing in it nor see its presence (NotFound, as for a
// conversation that does not exist), and changes nothing.
func TestPresenceStranger(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOptions{verifier: auth.NewHS256(testSecret), presence: &presence.Options{}})
	alice, mallory := tb.clientAs(tokenFor(t, "alice")), tb.clientAs(tokenFor(t, "mallory"))
	id := createAs(t, alice)
	_, err := mallory.SetTyping(context.Background(), connect.NewRequest(&convov1.SetTypingRequest{ConversationId: id, Typing: true}))
	requireCode(t, err, connect.CodeNotFound)
	_, err = mallory.SetTyping(context.Background(), connect.NewRequest(&convov1.SetTypingRequest{ConversationId: "not-an-id", Typing: true}))
	requireCode(t, err, connect.CodeInvalidArgument)

	stream, err := mallory.StreamConversation(context.Background(), connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: id, IncludePresence: true}))
	if err == nil {
		for stream.Receive() {
			t.Fatalf("a stranger's stream got %v", stream.Msg())
		}
		err = stream.Err()
		stream.Close()
	}
	requireCode(t, err, connect.CodeNotFound)
	if got := tb.presence.Current(uuid.MustParse(id)); len(got) != 0 {
		t.Fatalf("the stranger changed the list: %v", got)
	}
}

// TestPresenceOfMembers: two users of one conversation on two servers,
// end to end. Alice (the owner) watches on A; Pat (a participant) opens
// the conversation on B and types: Alice sees Pat viewing, then typing,
// then gone once Pat's stream closes. Vic (a viewer) watches too, but may
// not report typing (PermissionDenied, naming the role), and nothing
// changes.
func TestPresenceOfMembers(t *testing.T) {
	forEachFeed(t, func(t *testing.T, feed string) {
		a, b := presenceServers(t, feed, presence.Options{})
		alice, pat, vic := a.clientAs(tokenFor(t, "alice")), b.clientAs(tokenFor(t, "pat")), b.clientAs(tokenFor(t, "vic"))
		id := createAs(t, alice)
		if _, err := addMember(alice, id, "pat", "participant"); err != nil {
			t.Fatal(err)
		}
		if _, err := addMember(alice, id, "vic", "viewer"); err != nil {
			t.Fatal(err)
		}

		watching := subscribe(t, alice, &convov1.StreamConversationRequest{ConversationId: id, IncludePresence: true})
		waitPresence(t, watching, "alice:viewing", streamTimeout)
		onB := subscribe(t, pat, &convov1.StreamConversationRequest{ConversationId: id, IncludePresence: true})
		waitPresence(t, watching, "alice:viewing pat:viewing", streamTimeout)
		if _, err := pat.SetTyping(context.Background(), connect.NewRequest(&convov1.SetTypingRequest{ConversationId: id, Typing: true})); err != nil {
			t.Fatal(err)
		}
		waitPresence(t, watching, "alice:viewing pat:viewing,typing", streamTimeout)
		if _, err := pat.SetTyping(context.Background(), connect.NewRequest(&convov1.SetTypingRequest{ConversationId: id, Typing: false})); err != nil {
			t.Fatal(err)
		}
		waitPresence(t, watching, "alice:viewing pat:viewing", streamTimeout)

		_, err := vic.SetTyping(context.Background(), connect.NewRequest(&convov1.SetTypingRequest{ConversationId: id, Typing: true}))
		if ce := requireCode(t, err, connect.CodePermissionDenied); ce != nil && !strings.Contains(ce.Message(), "a viewer may not") {
			t.Errorf("a viewer's SetTyping: %q does not name the role", ce.Message())
		}
		onVic := subscribe(t, vic, &convov1.StreamConversationRequest{ConversationId: id, IncludePresence: true})
		waitPresence(t, watching, "alice:viewing pat:viewing vic:viewing", streamTimeout)

		// Pat's tab closes: gone from A at once, not after the time-to-live.
		onB.close()
		took := waitPresence(t, watching, "alice:viewing vic:viewing", 5*time.Second)
		t.Logf("pat's closed stream left A's list in %v", took)
		onVic.close()
		waitPresence(t, watching, "alice:viewing", 5*time.Second)
	})
}
