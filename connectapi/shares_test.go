package connectapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
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
