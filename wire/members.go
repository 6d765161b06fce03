package wire

import (
	"strings"
	"unicode"

	"github.com/convo-dev/convo/conversation"
)

// MaxUserID is the longest user id, in bytes: auth's bound on a token's
// sub, and convo.members.user_id's.
const MaxUserID = 200

// CheckUserID checks a user id a request names (a member to add or
// remove): 1 to MaxUserID bytes, no control character, as auth accepts a
// token's sub and convo._check_user_id checks it. Errors are Invalid and
// name field.
func CheckUserID(field, id string) error {
	switch {
	case id == "":
		return Invalid(field, "is required")
	case len(id) > MaxUserID:
		return Invalid(field, "must be at most %d bytes, got %d", MaxUserID, len(id))
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return Invalid(field, "must not contain control characters")
	}
	return nil
}

// MemberRole parses the role a member is given: "viewer" or
// "participant" (the owner is no role a member is given). Errors are
// Invalid and name field.
func MemberRole(field, role string) (conversation.MemberRole, error) {
	switch r := conversation.MemberRole(role); r {
	case conversation.RoleViewer, conversation.RoleParticipant:
		return r, nil
	case "":
		return "", Invalid(field, `is required: "viewer" or "participant"`)
	default:
		return "", Invalid(field, `must be "viewer" or "participant", got %q`, Truncate(role, 64))
	}
}
