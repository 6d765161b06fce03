package connectapi

import (
	"context"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/wire"
)

// user returns the authenticated user, which admission puts in the
// context of every call it lets through.
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
