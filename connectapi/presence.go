package connectapi

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/presence"
	"github.com/convo-dev/convo/wire"
)

// SetTyping records that the caller is typing in a conversation, or has
// stopped; every stream of it that asked include_presence, on every
// server, sees the change in its next Presence. It is refused
// ResourceExhausted with Retry-After past the typing rate (Options.Typing,
// before anything is read), NotFound for a conversation the caller may not
// read, and Unimplemented on a server without presence.
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
	if err := s.canRead(ctx, caller, id); err != nil {
		return nil, err
	}
	s.presence.SetTyping(id, caller, req.Msg.GetTyping())
	return connect.NewResponse(&convov1.SetTypingResponse{}), nil
}

// canRead returns nil when caller may read conversation id, and NotFound
// (the same as for a conversation that does not exist) when not. It is
// presence's one access check: today the caller must own the conversation.
func (s *service) canRead(ctx context.Context, caller string, id uuid.UUID) error {
	_, err := s.store.Conversation(ctx, caller, id)
	return err
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
