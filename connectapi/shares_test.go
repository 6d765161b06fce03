package connectapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/presence"
)

func createShare(c convov1connect.ConversationServiceClient, req *convov1.CreateShareRequest) (*convov1.CreateShareResponse, error) {
	res, err := c.CreateShare(context.Background(), connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// TestShareRPCs: the owner and a participant create shares, the token
// comes back once (ListShares carries none), a viewer is PermissionDenied
// and a removed member or a stranger NotFound; a participant may not
// revoke the owner's share, the owner revokes it.
func TestShareRPCs(t *testing.T) {
	t.Parallel()
	tb := setupAuth(t)
	users := tb.users(t)
	f := tb.shared(t, users, "")
	ctx := context.Background()

	made, err := createShare(users["alice"], &convov1.CreateShareRequest{ConversationId: f.conv, Mode: "snapshot"})
	if err != nil {
		t.Fatal(err)
	}
	if len(made.Token) != 43 || made.Share.LeafMessageId != f.reply || made.Share.Mode != "snapshot" || made.Share.CreatedBy != "alice" {
		t.Fatalf("CreateShare: %v", made)
	}
	exp := timestamppb.New(time.Now().Add(time.Hour))
	pats, err := createShare(users["pat"], &convov1.CreateShareRequest{ConversationId: f.conv, Mode: "live", IncludeTools: true,
		LeafMessageId: f.user, ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	if !pats.Share.IncludeTools || pats.Share.LeafMessageId != f.user || !pats.Share.ExpiresAt.AsTime().Equal(exp.AsTime().Truncate(time.Microsecond)) {
		t.Fatalf("pat's share: %v", pats.Share)
	}
	before := conversationOf(t, users["alice"], f.conv)
	_, err = createShare(users["vic"], &convov1.CreateShareRequest{ConversationId: f.conv, Mode: "live"})
	requireCode(t, err, connect.CodePermissionDenied)
	for _, u := range []string{"rex", "sam"} {
		_, err = createShare(users[u], &convov1.CreateShareRequest{ConversationId: f.conv, Mode: "live"})
		requireCode(t, err, connect.CodeNotFound)
		_, err = users[u].ListShares(ctx, connect.NewRequest(&convov1.ListSharesRequest{ConversationId: f.conv}))
		requireCode(t, err, connect.CodeNotFound)
	}
	_, err = users["pat"].RevokeShare(ctx, connect.NewRequest(&convov1.RevokeShareRequest{ShareId: made.Share.Id}))
	requireCode(t, err, connect.CodePermissionDenied)
	if after := conversationOf(t, users["alice"], f.conv); after != before {
		t.Fatal("a refused share call changed the conversation")
	}

	list, err := users["pat"].ListShares(ctx, connect.NewRequest(&convov1.ListSharesRequest{ConversationId: f.conv}))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Msg.Shares) != 2 || list.Msg.Shares[0].Id != pats.Share.Id || list.Msg.Shares[1].Id != made.Share.Id {
		t.Fatalf("ListShares: %v", list.Msg)
	}
	wireBytes, _ := proto.Marshal(list.Msg)
	if strings.Contains(string(wireBytes), made.Token) || strings.Contains(string(wireBytes), pats.Token) {
		t.Fatal("ListShares carries a token")
	}
	revoked, err := users["alice"].RevokeShare(ctx, connect.NewRequest(&convov1.RevokeShareRequest{ShareId: made.Share.Id}))
	if err != nil || revoked.Msg.Share.RevokedAt == nil {
		t.Fatalf("RevokeShare: %v, %v", revoked, err)
	}
}

// TestShareRefusals: malformed requests are InvalidArgument naming the
// field, and write nothing.
func TestShareRefusals(t *testing.T) {
	t.Parallel()
	tb := setupAuth(t)
	users := tb.users(t)
	f := tb.shared(t, users, "")
	alice := users["alice"]
	before := conversationOf(t, alice, f.conv)
	for _, c := range []struct {
		name  string
		req   *convov1.CreateShareRequest
		field string
	}{
		{"no mode", &convov1.CreateShareRequest{ConversationId: f.conv}, "mode"},
		{"bad mode", &convov1.CreateShareRequest{ConversationId: f.conv, Mode: "public"}, "mode"},
		{"bad leaf", &convov1.CreateShareRequest{ConversationId: f.conv, Mode: "live", LeafMessageId: "x"}, "leafMessageId"},
		{"no conversation", &convov1.CreateShareRequest{Mode: "live"}, "conversationId"},
		{"past expiry", &convov1.CreateShareRequest{ConversationId: f.conv, Mode: "live", ExpiresAt: timestamppb.New(time.Now().Add(-time.Second))}, "expiresAt"},
		{"far expiry", &convov1.CreateShareRequest{ConversationId: f.conv, Mode: "live", ExpiresAt: timestamppb.New(time.Now().Add(367 * 24 * time.Hour))}, "expiresAt"},
		{"bad expiry", &convov1.CreateShareRequest{ConversationId: f.conv, Mode: "live", ExpiresAt: &timestamppb.Timestamp{Nanos: -1}}, "expiresAt"},
	} {
		_, err := createShare(alice, c.req)
		ce := requireCode(t, err, connect.CodeInvalidArgument)
		if !strings.Contains(ce.Message(), c.field) {
			t.Errorf("%s: %q does not name %s", c.name, ce.Message(), c.field)
		}
	}
	_, err := alice.RevokeShare(context.Background(), connect.NewRequest(&convov1.RevokeShareRequest{ShareId: "nope"}))
	requireCode(t, err, connect.CodeInvalidArgument)
	list, err := alice.ListShares(context.Background(), connect.NewRequest(&convov1.ListSharesRequest{ConversationId: f.conv}))
	if err != nil || len(list.Msg.Shares) != 0 {
		t.Fatalf("shares after refusals: %v, %v", list, err)
	}
	if after := conversationOf(t, alice, f.conv); after != before {
		t.Fatal("a refusal changed the conversation")
	}
}

// toolReply writes prompt's reply: a tool_use block whose call has input
// {"q": "secret-arg"} and output "secret-result", then text.
func (tb *testBundle) toolReply(t *testing.T, prompt, text string) {
	t.Helper()
	ctx := context.Background()
	id := uuid.MustParse(prompt)
	if err := tb.api.PromptStart(ctx, id); err != nil {
		t.Fatal(err)
	}
	block := tb.startBlock(t, id, "tool_use")
	tb.appendText(t, block, "secret-content")
	call, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: block, Name: "search", Input: json.RawMessage(`{"q":"secret-arg"}`)})
	if err != nil {
		t.Fatal(err)
	}
	out := "secret-result"
	if err := tb.api.ToolCallComplete(ctx, apiq.ToolCallCompleteParams{ToolCallID: call, Output: &out}); err != nil {
		t.Fatal(err)
	}
	tb.appendText(t, tb.startBlock(t, id, "text"), text)
	if err := tb.api.PromptComplete(ctx, id); err != nil {
		t.Fatal(err)
	}
}

func getShared(token string, c convov1connect.ConversationServiceClient) (*convov1.GetSharedConversationResponse, error) {
	res, err := c.GetSharedConversation(context.Background(), connect.NewRequest(&convov1.GetSharedConversationRequest{Token: token}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// TestSharedConversation: with its token alone (no Authorization; a
// bogus one is ignored), a snapshot share shows the path up to its leaf
// and nothing written after, a live share the active path now; tool
// blocks are blanked unless the share includes tools; no sender id, no
// feedback, no creator. Revoked, expired and unknown tokens are NotFound
// alike, an empty one InvalidArgument.
func TestSharedConversation(t *testing.T) {
	t.Parallel()
	tb := setupAuth(t)
	alice := tb.clientAs(tokenFor(t, "alice"))
	ctx := context.Background()
	first := tb.send(t, alice, "", "first question")
	tb.toolReply(t, first.PromptId, "answer one")
	conv := first.ConversationId
	if _, err := alice.SubmitFeedback(ctx, connect.NewRequest(&convov1.SubmitFeedbackRequest{MessageId: first.AssistantMessageId, Rating: convov1.Rating_RATING_UP, Comment: "secret-comment"})); err != nil {
		t.Fatal(err)
	}
	snap, err := createShare(alice, &convov1.CreateShareRequest{ConversationId: conv, Mode: "snapshot"})
	if err != nil {
		t.Fatal(err)
	}
	live, err := createShare(alice, &convov1.CreateShareRequest{ConversationId: conv, Mode: "live", IncludeTools: true})
	if err != nil {
		t.Fatal(err)
	}
	second := tb.send(t, alice, conv, "second question")
	tb.writeReply(t, second.PromptId, "answer two")

	anon := convov1connect.NewConversationServiceClient(http.DefaultClient, tb.url)
	bogus := tb.clientAs("not-a-valid-token")
	for _, c := range []convov1connect.ConversationServiceClient{anon, bogus} {
		got, err := getShared(snap.Token, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Messages) != 2 || got.Messages[0].Id != first.UserMessageId || got.Messages[1].Id != first.AssistantMessageId {
			t.Fatalf("snapshot: %d messages, want the first two: %v", len(got.Messages), got.Messages)
		}
		if got.Conversation.GetId() != conv || got.Share.GetMode() != "snapshot" || got.Share.GetCreatedBy() != "" {
			t.Fatalf("snapshot's conversation and share: %v %v", got.Conversation, got.Share)
		}
		j := protojson.Format(got)
		for _, hidden := range []string{"second question", "answer two", "secret", "alice"} {
			if strings.Contains(j, hidden) {
				t.Errorf("the snapshot shows %q: %s", hidden, j)
			}
		}
		blocks := got.Messages[1].Blocks
		if len(blocks) != 2 || blocks[0].ToolCall.GetName() != "search" || blocks[0].ToolCall.GetStatus() != "completed" || blocks[1].Content != "answer one" {
			t.Fatalf("snapshot's reply blocks: %v", blocks)
		}
	}
	got, err := getShared(live.Token, anon)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 4 || got.Messages[3].Blocks[0].Content != "answer two" {
		t.Fatalf("live: %v", got.Messages)
	}
	tool := got.Messages[1].Blocks[0]
	if tool.Content != "secret-content" || tool.ToolCall.GetOutput() != "secret-result" || tool.ToolCall.GetInput().GetStructValue().GetFields()["q"].GetStringValue() != "secret-arg" {
		t.Fatalf("a share with tools: %v", tool)
	}

	if _, err := alice.RevokeShare(ctx, connect.NewRequest(&convov1.RevokeShareRequest{ShareId: snap.Share.Id})); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.pool.Exec(ctx, `UPDATE convo.shares SET expires_at = now() - interval '1 second' WHERE id = $1`, live.Share.Id); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, token := range []string{snap.Token, live.Token, "unknown"} {
		_, err := getShared(token, anon)
		msgs = append(msgs, requireCode(t, err, connect.CodeNotFound).Message())
	}
	if msgs[0] != msgs[1] || msgs[1] != msgs[2] {
		t.Fatalf("revoked, expired, unknown answer differently: %q", msgs)
	}
	_, err = getShared("", anon)
	requireCode(t, err, connect.CodeInvalidArgument)
	_, err = getShared(strings.Repeat("a", 129), anon)
	requireCode(t, err, connect.CodeInvalidArgument)
}

// TestShareTokenIsNoBearer: a share token sent as a bearer token opens
// no RPC but the share's own reads: every other RPC of the service, each
// write among them, is Unauthenticated, and nothing changes.
func TestShareTokenIsNoBearer(t *testing.T) {
	t.Parallel()
	tb := setupAuth(t)
	alice := tb.clientAs(tokenFor(t, "alice"))
	sent := tb.send(t, alice, "", "hello")
	made, err := createShare(alice, &convov1.CreateShareRequest{ConversationId: sent.ConversationId, Mode: "live"})
	if err != nil {
		t.Fatal(err)
	}
	before := tb.countRows(t)
	svc := convov1.File_convo_v1_conversation_service_proto.Services().ByName("ConversationService")
	called := 0
	for i := range svc.Methods().Len() {
		m := svc.Methods().Get(i)
		path := "/" + string(svc.FullName()) + "/" + string(m.Name())
		if path == convov1connect.ConversationServiceGetSharedConversationProcedure ||
			path == convov1connect.ConversationServiceStreamSharedConversationProcedure {
			continue
		}
		c := connect.NewClient[emptypb.Empty, emptypb.Empty](http.DefaultClient, tb.url+path,
			connect.WithInterceptors(bearer(made.Token)))
		if m.IsStreamingServer() {
			s, err := c.CallServerStream(context.Background(), connect.NewRequest(&emptypb.Empty{}))
			if err == nil {
				for s.Receive() {
				}
				err = s.Err()
				s.Close()
			}
			requireCode(t, err, connect.CodeUnauthenticated)
		} else {
			_, err := c.CallUnary(context.Background(), connect.NewRequest(&emptypb.Empty{}))
			requireCode(t, err, connect.CodeUnauthenticated)
		}
		called++
	}
	if called < 30 {
		t.Fatalf("called %d RPCs: the service has more", called)
	}
	if after := tb.countRows(t); after != before {
		t.Fatalf("a call with a share token changed the database: %s -> %s", before, after)
	}
}

// shareStream is an open StreamSharedConversation: its states as they
// come, and how it ended.
type shareStream struct {
	mu     sync.Mutex
	states []*convov1.GetSharedConversationResponse
	err    error
	done   chan struct{}
}

func openShareStream(t *testing.T, c convov1connect.ConversationServiceClient, token string) *shareStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := c.StreamSharedConversation(ctx, connect.NewRequest(&convov1.StreamSharedConversationRequest{Token: token}))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &shareStream{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for st.Receive() {
			s.mu.Lock()
			s.states = append(s.states, st.Msg().State)
			s.mu.Unlock()
		}
		s.mu.Lock()
		s.err = st.Err()
		s.mu.Unlock()
	}()
	t.Cleanup(func() { cancel(); <-s.done })
	return s
}

// waitFor waits until a state satisfies ok.
func (s *shareStream) waitFor(t *testing.T, what string, ok func(*convov1.GetSharedConversationResponse) bool) {
	t.Helper()
	deadline := time.Now().Add(streamTimeout)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		for _, st := range s.states {
			if ok(st) {
				s.mu.Unlock()
				return
			}
		}
		s.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no state %s", what)
}

// endedWithin waits d for the stream to end and returns how.
func (s *shareStream) endedWithin(t *testing.T, d time.Duration, what string) error {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(d):
		t.Fatalf("%s: the stream is still open after %s", what, d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
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

// TestShareStreamRevokedOnEveryServer: two servers on one database, a
// live share's stream on each and a snapshot share's on A. The live
// streams follow a reply in flight (with tools blanked) and the snapshot
// stream never shows it; revoking the live share on A ends both its
// streams within 1 s, on A and on B, with NotFound, and the token then
// opens nothing; the snapshot share's stream stays open until its own
// revocation, which ends it within 1 s too.
func TestShareStreamRevokedOnEveryServer(t *testing.T) {
	t.Parallel()
	for _, feed := range feeds {
		t.Run(feed, func(t *testing.T) {
			t.Parallel()
			a, b := presenceServers(t, feed, presence.Options{})
			if feed == feedLogical {
				a.logicalFeed(t)
				b.logicalFeed(t)
			}
			alice := a.clientAs(tokenFor(t, "alice"))
			sent := a.send(t, alice, "", "hello")
			a.writeReply(t, sent.PromptId, "first answer")
			conv := sent.ConversationId
			live, err := createShare(alice, &convov1.CreateShareRequest{ConversationId: conv, Mode: "live"})
			if err != nil {
				t.Fatal(err)
			}
			snap, err := createShare(alice, &convov1.CreateShareRequest{ConversationId: conv, Mode: "snapshot"})
			if err != nil {
				t.Fatal(err)
			}
			anonA := convov1connect.NewConversationServiceClient(http.DefaultClient, a.url)
			anonB := convov1connect.NewConversationServiceClient(http.DefaultClient, b.url)
			onA, onB := openShareStream(t, anonA, live.Token), openShareStream(t, anonB, live.Token)
			snapA := openShareStream(t, anonA, snap.Token)
			for _, s := range []*shareStream{onA, onB, snapA} {
				s.waitFor(t, "with the first answer", func(st *convov1.GetSharedConversationResponse) bool {
					return len(st.Messages) == 2 && lastText(st) == "first answer"
				})
			}

			// A reply in flight: the live streams follow it, tools blanked.
			next := a.send(t, alice, conv, "more")
			prompt := uuid.MustParse(next.PromptId)
			if err := a.api.PromptStart(context.Background(), prompt); err != nil {
				t.Fatal(err)
			}
			tool := a.startBlock(t, prompt, "tool_use")
			a.appendText(t, tool, "secret-content")
			a.appendText(t, a.startBlock(t, prompt, "text"), "streaming so far")
			for _, s := range []*shareStream{onA, onB} {
				s.waitFor(t, "following the reply in flight", func(st *convov1.GetSharedConversationResponse) bool {
					return len(st.Messages) == 4 && lastText(st) == "streaming so far"
				})
			}
			for _, s := range []*shareStream{onA, onB, snapA} {
				s.mu.Lock()
				for _, st := range s.states {
					if j := protojson.Format(st); strings.Contains(j, "secret") {
						t.Errorf("a share's stream shows a tool's content: %s", j)
					}
				}
				s.mu.Unlock()
			}
			snapA.mu.Lock()
			for _, st := range snapA.states {
				if len(st.Messages) != 2 {
					t.Errorf("the snapshot stream shows %d messages, want 2", len(st.Messages))
				}
			}
			snapA.mu.Unlock()

			if _, err := alice.RevokeShare(context.Background(), connect.NewRequest(&convov1.RevokeShareRequest{ShareId: live.Share.Id})); err != nil {
				t.Fatal(err)
			}
			for name, s := range map[string]*shareStream{"A": onA, "B": onB} {
				err := s.endedWithin(t, time.Second, "server "+name)
				requireCode(t, err, connect.CodeNotFound)
			}
			_, err = getShared(live.Token, anonB)
			requireCode(t, err, connect.CodeNotFound)
			select {
			case <-snapA.done:
				t.Fatalf("the snapshot share's stream ended: %v", snapA.err)
			default:
			}
			// A snapshot share's stream, which reads nothing after its
			// start, ends at its revocation all the same.
			if _, err := alice.RevokeShare(context.Background(), connect.NewRequest(&convov1.RevokeShareRequest{ShareId: snap.Share.Id})); err != nil {
				t.Fatal(err)
			}
			requireCode(t, snapA.endedWithin(t, time.Second, "the snapshot share"), connect.CodeNotFound)
		})
	}
}

// TestShareStreamExpires: a share's stream ends with NotFound at the
// share's expiry, by its own deadline (no event marks it), and the token
// then opens nothing.
func TestShareStreamExpires(t *testing.T) {
	t.Parallel()
	tb := setupAuth(t)
	alice := tb.clientAs(tokenFor(t, "alice"))
	sent := tb.send(t, alice, "", "hello")
	made, err := createShare(alice, &convov1.CreateShareRequest{ConversationId: sent.ConversationId, Mode: "snapshot",
		ExpiresAt: timestamppb.New(time.Now().Add(1500 * time.Millisecond))})
	if err != nil {
		t.Fatal(err)
	}
	anon := convov1connect.NewConversationServiceClient(http.DefaultClient, tb.url)
	s := openShareStream(t, anon, made.Token)
	s.waitFor(t, "at the start", func(st *convov1.GetSharedConversationResponse) bool { return len(st.Messages) == 2 })
	err = s.endedWithin(t, 15*time.Second, "at expiry")
	if ce := requireCode(t, err, connect.CodeNotFound); !strings.Contains(ce.Message(), "share does not exist") {
		t.Fatalf("ended with %q", ce.Message())
	}
	_, err = getShared(made.Token, anon)
	requireCode(t, err, connect.CodeNotFound)
	again, err := anon.StreamSharedConversation(context.Background(), connect.NewRequest(&convov1.StreamSharedConversationRequest{Token: made.Token}))
	if err == nil {
		if again.Receive() {
			t.Fatalf("a stream of an expired share sent %v", again.Msg())
		}
		err = again.Err()
		again.Close()
	}
	requireCode(t, err, connect.CodeNotFound)
}

// TestForkShare: a signed-in user continues a shared conversation: a new
// conversation of theirs holds the shared path as the share shows it
// (tool blocks blanked, their own id as the user messages' sender), takes
// a new message below it, and the original is unchanged; a call without
// a user is Unauthenticated, a revoked token NotFound.
func TestForkShare(t *testing.T) {
	t.Parallel()
	tb := setupAuth(t)
	alice, bob := tb.clientAs(tokenFor(t, "alice")), tb.clientAs(tokenFor(t, "bob"))
	ctx := context.Background()
	first := tb.send(t, alice, "", "first question")
	tb.toolReply(t, first.PromptId, "answer one")
	conv := first.ConversationId
	made, err := createShare(alice, &convov1.CreateShareRequest{ConversationId: conv, Mode: "snapshot"})
	if err != nil {
		t.Fatal(err)
	}
	tb.writeReply(t, tb.send(t, alice, conv, "second question").PromptId, "answer two")
	before := conversationOf(t, alice, conv)

	res, err := bob.ForkShare(ctx, connect.NewRequest(&convov1.ForkShareRequest{Token: made.Token}))
	if err != nil {
		t.Fatal(err)
	}
	fork := res.Msg.Conversation.Id
	if fork == conv || res.Msg.Conversation.Title != "first question" {
		t.Fatalf("fork: %v", res.Msg.Conversation)
	}
	got, err := bob.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: fork}))
	if err != nil {
		t.Fatal(err)
	}
	msgs := got.Msg.Messages
	if len(msgs) != 2 || msgs[0].Role != "user" || msgs[0].SenderId != "bob" || msgs[0].Blocks[0].Content != "first question" ||
		msgs[1].Role != "assistant" || msgs[1].Status != "completed" || msgs[1].ParentId != msgs[0].Id {
		t.Fatalf("the fork's messages: %v", msgs)
	}
	if blocks := msgs[1].Blocks; len(blocks) != 2 || blocks[0].BlockType != "tool_use" || blocks[1].Content != "answer one" {
		t.Fatalf("the fork's reply: %v", blocks)
	}
	if j := protojson.Format(got.Msg); strings.Contains(j, "secret") || strings.Contains(j, "second question") {
		t.Fatalf("the fork holds what the share hides: %s", j)
	}
	next := tb.send(t, bob, fork, "go on")
	tb.writeReply(t, next.PromptId, "going on")
	if after := conversationOf(t, alice, conv); after != before {
		t.Fatal("forking changed the original")
	}
	_, err = alice.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: fork}))
	requireCode(t, err, connect.CodeNotFound)

	anon := convov1connect.NewConversationServiceClient(http.DefaultClient, tb.url)
	_, err = anon.ForkShare(ctx, connect.NewRequest(&convov1.ForkShareRequest{Token: made.Token}))
	requireCode(t, err, connect.CodeUnauthenticated)
	if _, err := alice.RevokeShare(ctx, connect.NewRequest(&convov1.RevokeShareRequest{ShareId: made.Share.Id})); err != nil {
		t.Fatal(err)
	}
	rows := tb.countRows(t)
	_, err = bob.ForkShare(ctx, connect.NewRequest(&convov1.ForkShareRequest{Token: made.Token}))
	requireCode(t, err, connect.CodeNotFound)
	if tb.countRows(t) != rows {
		t.Fatal("a refused fork wrote something")
	}
}
