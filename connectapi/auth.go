package connectapi

import (
	"context"
	"net/http"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/wire"
)

// authInterceptor authenticates every RPC and puts the user in its
// context. Its refusals are domain errors, which the error interceptor
// (errors.go) maps.
type authInterceptor struct {
	auth auth.Authenticator
}

func (i authInterceptor) authenticate(ctx context.Context, h http.Header) (context.Context, error) {
	user, err := i.auth.Authenticate(ctx, h)
	if err != nil {
		return nil, err
	}
	return conversation.WithUser(ctx, user), nil
}

func (i authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, err := i.authenticate(ctx, req.Header())
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (i authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := i.authenticate(ctx, conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// user returns the authenticated user; the interceptor guarantees one.
func user(ctx context.Context) (string, error) {
	u, ok := conversation.UserFromContext(ctx)
	if !ok {
		return "", conversation.Errorf(conversation.Unauthenticated, "no authenticated user in the request context")
	}
	return u, nil
}

// userAndID returns the authenticated user and the required UUID field of
// the request: how most calls start.
func userAndID(ctx context.Context, field, value string) (string, uuid.UUID, error) {
	owner, err := user(ctx)
	if err != nil {
		return "", uuid.Nil, err
	}
	id, err := wire.RequireID(field, value)
	if err != nil {
		return "", uuid.Nil, err
	}
	return owner, id, nil
}
