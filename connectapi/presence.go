package connectapi

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/presence"
	"github.com/convo-dev/convo/wire"
)

// SetTyping records that the caller is typing in a conversation, or has
// stopped; every stream of it that asked include_presence, on every
// server, sees the change in its next Presence. It is refused
// ResourceExhausted with Retry-After past the typing rate (Options.Typing,
// before anything is read), NotFound for a conversation the caller has no
// role in, PermissionDenied for a viewer, and Unimplemented on a server
// without presence.
func (s *service) SetTyping(ctx context.Context, req *connect.Request[convov1.SetTypingRequest]) (*connect.Response[convov1.SetTypingResponse], error) {
	if s.presence == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this server does not track presence"))
	}
	caller, id, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	if err := s.typing.Allow(caller); err != nil {
		return nil, err
	}
	if err := s.mayType(ctx, caller, id); err != nil {
		return nil, err
	}
	s.presence.SetTyping(id, caller, req.Msg.GetTyping())
	return connect.NewResponse(&convov1.SetTypingResponse{}), nil
}

// mayType returns nil when caller may report typing in conversation id:
// its owner or a participant, who may send. It is NotFound (the same as
// for a conversation that does not exist) for anyone else, and
// PermissionDenied for a viewer.
func (s *service) mayType(ctx context.Context, caller string, id uuid.UUID) error {
	c, err := s.store.Conversation(ctx, caller, id)
	if err != nil {
		return err
	}
	if c.Role == conversation.RoleViewer {
		return conversation.Errorf(conversation.PermissionDenied,
			"set_typing: conversation %s: a viewer may not report typing (the owner and participants only)", id)
	}
	return nil
}

// joinPresence counts the caller of a stream that asked include_presence
// as viewing the conversation until the stream closes, and offers the
// stream the conversation's list, which it sends right after its start.
// The stream was opened already, so the caller may read the conversation.
func (s *service) joinPresence(sub *wire.Subscription, caller string, id uuid.UUID) {
	leave := s.presence.Join(id, caller, func(entries []presence.Entry) {
		sub.SetEphemeral(wire.Presence(entries))
	})
	sub.OnClose(leave)
}
