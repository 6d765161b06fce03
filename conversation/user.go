package conversation

import "context"

type userKey struct{}

// WithUser returns a context carrying the authenticated user's id (the
// owner_id of the conversations the request may touch).
func WithUser(ctx context.Context, userID string) context.Context {
	return context.WithValue(ctx, userKey{}, userID)
}

// UserFromContext returns the user id WithUser stored, and whether there
// was one.
func UserFromContext(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(userKey{}).(string)
	return id, ok && id != ""
}
