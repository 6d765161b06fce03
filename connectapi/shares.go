package connectapi

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

// CreateShare makes a share link of the conversation (the owner or a
// participant; docs/api.md, "Share links") and returns it with its token,
// which no other response ever carries.
func (s *service) CreateShare(ctx context.Context, req *connect.Request[convov1.CreateShareRequest]) (*connect.Response[convov1.CreateShareResponse], error) {
	caller, id, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	leaf, err := wire.OptionalID("leafMessageId", req.Msg.GetLeafMessageId())
	if err != nil {
		return nil, err
	}
	mode, err := wire.ShareMode("mode", req.Msg.GetMode())
	if err != nil {
		return nil, err
	}
	expires, err := wire.ShareExpiry("expiresAt", req.Msg.GetExpiresAt(), time.Now())
	if err != nil {
		return nil, err
	}
	sh, token, err := s.store.CreateShare(ctx, conversation.CreateShareParams{
		CallerID: caller, ConversationID: id, LeafMessageID: leaf.UUID, Mode: mode,
		IncludeTools: req.Msg.GetIncludeTools(), ExpiresAt: expires,
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.CreateShareResponse{Share: wire.Share(sh), Token: token}), nil
}

// ListShares lists the conversation's shares, newest first; the owner
// and participants.
func (s *service) ListShares(ctx context.Context, req *connect.Request[convov1.ListSharesRequest]) (*connect.Response[convov1.ListSharesResponse], error) {
	caller, id, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	list, err := s.store.ListShares(ctx, caller, id)
	if err != nil {
		return nil, err
	}
	out := &convov1.ListSharesResponse{Shares: make([]*convov1.Share, len(list))}
	for i, sh := range list {
		out.Shares[i] = wire.Share(sh)
	}
	return connect.NewResponse(out), nil
}

// RevokeShare ends a share: its creator or the conversation's owner.
func (s *service) RevokeShare(ctx context.Context, req *connect.Request[convov1.RevokeShareRequest]) (*connect.Response[convov1.RevokeShareResponse], error) {
	caller, id, err := userAndID(ctx, "shareId", req.Msg.GetShareId())
	if err != nil {
		return nil, err
	}
	sh, err := s.store.RevokeShare(ctx, caller, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.RevokeShareResponse{Share: wire.Share(sh)}), nil
}

// GetSharedConversation reads what a share shows, with its token alone
// (admission lets it through without a user: anonymousProcedures), its
// files' URLs signed as the owner's reads sign them.
func (s *service) GetSharedConversation(ctx context.Context, req *connect.Request[convov1.GetSharedConversationRequest]) (*connect.Response[convov1.GetSharedConversationResponse], error) {
	token, err := wire.ShareToken("token", req.Msg.GetToken())
	if err != nil {
		return nil, err
	}
	out, err := wire.SharedState(ctx, s.store, s.urls, token)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// ForkShare copies what a share shows into a new conversation of the
// caller (a signed-in user: the share token is no bearer token).
func (s *service) ForkShare(ctx context.Context, req *connect.Request[convov1.ForkShareRequest]) (*connect.Response[convov1.ForkShareResponse], error) {
	caller, err := user(ctx)
	if err != nil {
		return nil, err
	}
	token, err := wire.ShareToken("token", req.Msg.GetToken())
	if err != nil {
		return nil, err
	}
	id, err := s.store.ForkShare(ctx, caller, token)
	if err != nil {
		return nil, err
	}
	c, err := s.store.Conversation(ctx, caller, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.ForkShareResponse{Conversation: wire.Conversation(c)}), nil
}
