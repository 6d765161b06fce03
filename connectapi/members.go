package connectapi

import (
	"context"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

// AddMember adds a member to the conversation, or changes a member's role
// (the owner only; docs/api.md, "Members").
func (s *service) AddMember(ctx context.Context, req *connect.Request[convov1.AddMemberRequest]) (*connect.Response[convov1.AddMemberResponse], error) {
	caller, id, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	if err := wire.CheckUserID("userId", req.Msg.GetUserId()); err != nil {
		return nil, err
	}
	role, err := wire.MemberRole("role", req.Msg.GetRole())
	if err != nil {
		return nil, err
	}
	m, err := s.store.AddMember(ctx, caller, id, req.Msg.GetUserId(), role)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.AddMemberResponse{Member: wire.Member(m)}), nil
}

// RemoveMember removes a member: the owner removes anyone, a member only
// themself.
func (s *service) RemoveMember(ctx context.Context, req *connect.Request[convov1.RemoveMemberRequest]) (*connect.Response[convov1.RemoveMemberResponse], error) {
	caller, id, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	if err := wire.CheckUserID("userId", req.Msg.GetUserId()); err != nil {
		return nil, err
	}
	if err := s.store.RemoveMember(ctx, caller, id, req.Msg.GetUserId()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.RemoveMemberResponse{}), nil
}

// ListMembers lists the owner, then the members; for the owner and any
// member.
func (s *service) ListMembers(ctx context.Context, req *connect.Request[convov1.ListMembersRequest]) (*connect.Response[convov1.ListMembersResponse], error) {
	caller, id, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	ms, err := s.store.ListMembers(ctx, caller, id)
	if err != nil {
		return nil, err
	}
	out := &convov1.ListMembersResponse{Members: make([]*convov1.Member, len(ms))}
	for i, m := range ms {
		out.Members[i] = wire.Member(m)
	}
	return connect.NewResponse(out), nil
}
