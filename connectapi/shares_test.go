package connectapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
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
		if path == convov1connect.ConversationServiceGetSharedConversationProcedure {
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
