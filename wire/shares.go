package wire

import (
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// Share is s in its wire form (never its token).
func Share(s conversation.Share) *convov1.Share {
	out := &convov1.Share{
		Id: s.ID.String(), ConversationId: s.ConversationID.String(), CreatedBy: s.CreatedBy,
		Mode: string(s.Mode), IncludeTools: s.IncludeTools, CreatedAt: ts(s.CreatedAt),
	}
	if s.LeafMessageID != uuid.Nil {
		out.LeafMessageId = s.LeafMessageID.String()
	}
	if s.ExpiresAt != nil {
		out.ExpiresAt = ts(*s.ExpiresAt)
	}
	if s.RevokedAt != nil {
		out.RevokedAt = ts(*s.RevokedAt)
	}
	return out
}

// ShareMode parses a share's mode: "snapshot" or "live". Errors are
// Invalid and name field.
func ShareMode(field, mode string) (conversation.ShareMode, error) {
	switch m := conversation.ShareMode(mode); m {
	case conversation.ShareSnapshot, conversation.ShareLive:
		return m, nil
	case "":
		return "", Invalid(field, `is required: "snapshot" or "live"`)
	default:
		return "", Invalid(field, `must be "snapshot" or "live", got %q`, Truncate(mode, 64))
	}
}

// ShareExpiry parses a share's expiry: nil when unset, else a valid
// timestamp after now and at most conversation.MaxShareLifetime ahead.
// Errors are Invalid and name field.
func ShareExpiry(field string, t *timestamppb.Timestamp, now time.Time) (*time.Time, error) {
	if t == nil {
		return nil, nil
	}
	if err := t.CheckValid(); err != nil {
		return nil, Invalid(field, "is not a valid timestamp: %v", err)
	}
	at := t.AsTime()
	switch {
	case !at.After(now):
		return nil, Invalid(field, "must be in the future, got %s", at.Format(time.RFC3339))
	case at.After(now.Add(conversation.MaxShareLifetime)):
		return nil, Invalid(field, "must be at most 366 days ahead, got %s", at.Format(time.RFC3339))
	}
	return &at, nil
}
