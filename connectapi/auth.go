package connectapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/conversation"
)

// LocalUser is the user every request acts for in single-user mode.
const LocalUser = "local"

// Authenticator names the user of a request from its headers.
type Authenticator struct {
	// Verifier checks bearer tokens; nil is single-user mode, where every
	// request is LocalUser.
	Verifier auth.Verifier
}

// Authenticate returns the user id the request's Authorization header
// proves, or a conversation.Unauthenticated error.
func (a Authenticator) Authenticate(ctx context.Context, h http.Header) (string, error) {
	if a.Verifier == nil {
		return LocalUser, nil
	}
	// The scheme is case-insensitive (RFC 9110 §11.1): "bearer" is Bearer.
	scheme, token, _ := strings.Cut(strings.TrimSpace(h.Get("Authorization")), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", conversation.Errorf(conversation.Unauthenticated, "missing bearer token (Authorization: Bearer <JWT>)")
	}
	user, err := a.Verifier.Verify(ctx, strings.TrimSpace(token))
	if err != nil {
		if errors.Is(err, auth.ErrInvalidToken) {
			return "", conversation.Errorf(conversation.Unauthenticated, "%v", err)
		}
		return "", conversation.Errorf(conversation.Unavailable, "cannot verify token right now: %v", err)
	}
	return user, nil
}

// interceptor authenticates every RPC and puts the user in its context.
type interceptor struct {
	auth Authenticator
}

func (i interceptor) authenticate(ctx context.Context, h http.Header) (context.Context, error) {
	user, err := i.auth.Authenticate(ctx, h)
	if err != nil {
		return nil, connect.NewError(codes[conversation.ErrorCode(err)], errors.New(conversation.ErrorMessage(err)))
	}
	return conversation.WithUser(ctx, user), nil
}

func (i interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, err := i.authenticate(ctx, req.Header())
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (i interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
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
		return "", connect.NewError(connect.CodeUnauthenticated, errNoUser)
	}
	return u, nil
}
