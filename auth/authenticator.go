package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/convo-dev/convo/conversation"
)

// LocalUser is the user every request acts for in single-user mode.
const LocalUser = "local"

// Authenticator names the user of a request from its headers; every
// protocol (Connect, SSE, AG-UI, the AI SDK, history) authenticates with it.
type Authenticator struct {
	// Verifier checks bearer tokens; nil is single-user mode, where every
	// request is LocalUser.
	Verifier Verifier
}

// Authenticate returns the user id the Authorization header proves. Errors
// are conversation.Unauthenticated (no token, or a token Verify refuses),
// or Unavailable when the verifier cannot check tokens right now (its keys
// cannot be fetched).
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
		if errors.Is(err, ErrInvalidToken) {
			return "", conversation.Errorf(conversation.Unauthenticated, "%v", err)
		}
		return "", conversation.Errorf(conversation.Unavailable, "cannot verify token right now: %v", err)
	}
	return user, nil
}
