package connectapi

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

// StreamSharedConversation follows what a share shows, with its token
// alone (anonymousProcedures): wire.ShareStream's states, the loop the
// SSE route (GET /v1/shares/{token}/events) follows too. It ends with
// NotFound "share does not exist" when the share is revoked (on every
// server) or expires.
func (s *service) StreamSharedConversation(ctx context.Context, req *connect.Request[convov1.StreamSharedConversationRequest], out *connect.ServerStream[convov1.StreamSharedConversationResponse]) error {
	if s.hub == nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("this server does not stream"))
	}
	token, err := wire.ShareToken("token", req.Msg.GetToken())
	if err != nil {
		return err
	}
	follow := wire.ShareStream{Store: s.store, Hub: s.hub, URLs: s.urls}
	return follow.Follow(ctx, token, func(state *convov1.GetSharedConversationResponse) error {
		return out.Send(&convov1.StreamSharedConversationResponse{State: state})
	})
}
