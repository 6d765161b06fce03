package connectapi

import (
	"context"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

func (s *service) ListConversations(ctx context.Context, req *connect.Request[convov1.ListConversationsRequest]) (*connect.Response[convov1.ListConversationsResponse], error) {
	owner, err := user(ctx)
	if err != nil {
		return nil, err
	}
	limit, after, err := wire.Page(req.Msg.GetPageSize(), req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	// One row more than the page tells whether there is a next page.
	convs, err := s.store.ListConversations(ctx, owner, limit+1, after)
	if err != nil {
		return nil, err
	}
	out := &convov1.ListConversationsResponse{}
	if len(convs) > limit {
		convs = convs[:limit]
		last := convs[limit-1]
		out.NextPageToken = wire.EncodePageToken(conversation.PageCursor{Time: last.LastMessageAt, ID: last.ID})
	}
	for _, c := range convs {
		out.Conversations = append(out.Conversations, wire.Conversation(c))
	}
	return connect.NewResponse(out), nil
}

func (s *service) CreateConversation(ctx context.Context, req *connect.Request[convov1.CreateConversationRequest]) (*connect.Response[convov1.CreateConversationResponse], error) {
	owner, err := user(ctx)
	if err != nil {
		return nil, err
	}
	if err := wire.CheckTitle("title", req.Msg.GetTitle(), false); err != nil {
		return nil, err
	}
	c, err := s.store.CreateConversation(ctx, owner, req.Msg.GetTitle())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.CreateConversationResponse{Conversation: wire.Conversation(c)}), nil
}

func (s *service) RenameConversation(ctx context.Context, req *connect.Request[convov1.RenameConversationRequest]) (*connect.Response[convov1.RenameConversationResponse], error) {
	owner, id, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	if err := wire.CheckTitle("title", req.Msg.GetTitle(), true); err != nil {
		return nil, err
	}
	c, err := s.store.RenameConversation(ctx, owner, id, req.Msg.GetTitle())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.RenameConversationResponse{Conversation: wire.Conversation(c)}), nil
}

// SetSendPolicy sets what the conversation's sends that name no policy
// do while a reply is in flight.
func (s *service) SetSendPolicy(ctx context.Context, req *connect.Request[convov1.SetSendPolicyRequest]) (*connect.Response[convov1.SetSendPolicyResponse], error) {
	owner, id, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	policy, err := wire.ParseSendPolicy("sendPolicy", req.Msg.GetSendPolicy())
	if err != nil {
		return nil, err
	}
	c, err := s.store.SetSendPolicy(ctx, owner, id, policy)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.SetSendPolicyResponse{Conversation: wire.Conversation(c)}), nil
}

func (s *service) DeleteConversation(ctx context.Context, req *connect.Request[convov1.DeleteConversationRequest]) (*connect.Response[convov1.DeleteConversationResponse], error) {
	owner, id, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	if err := s.store.DeleteConversation(ctx, owner, id); err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.DeleteConversationResponse{}), nil
}

func (s *service) ClearConversation(ctx context.Context, req *connect.Request[convov1.ClearConversationRequest]) (*connect.Response[convov1.ClearConversationResponse], error) {
	owner, id, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	c, err := s.store.ClearConversation(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.ClearConversationResponse{Conversation: wire.Conversation(c)}), nil
}
