package conversation

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// MemberRole is a user's role in a conversation (docs/api.md, "Members"):
// what the user may do there.
type MemberRole string

const (
	// RoleOwner: the user who created the conversation
	// (Conversation.OwnerID). Everything: read, write, rename, clear,
	// delete, add and remove members.
	RoleOwner MemberRole = "owner"
	// RoleParticipant: reads and writes as the owner does (send, edit,
	// regenerate, switch, cancel, answer, rate, vote), but may not rename,
	// clear or delete the conversation nor change its members.
	RoleParticipant MemberRole = "participant"
	// RoleViewer: reads only.
	RoleViewer MemberRole = "viewer"
)

// Member is a user with a role in a conversation: its owner, or a member
// the owner added.
type Member struct {
	UserID string
	Role   MemberRole
	// AddedAt is when the member was added (the conversation's creation
	// for its owner); AddedBy who added them (the owner).
	AddedAt time.Time
	AddedBy string
}

// Members is what the store does with a conversation's members. Errors
// are *Error values: NotFound for a conversation the caller has no role
// in (as for one that does not exist), PermissionDenied for a role that
// may not do the action (naming the role), Invalid for a malformed user
// id or role.
type Members interface {
	// AddMember makes userID a member of the conversation with role
	// (RoleViewer or RoleParticipant), or changes the role of a member
	// already there, and returns the member; the owner only. Invalid for
	// the owner's own id. Event: memberAdded (none when nothing changed).
	AddMember(ctx context.Context, callerID string, conversationID uuid.UUID, userID string, role MemberRole) (Member, error)
	// RemoveMember removes userID from the conversation's members: the
	// owner removes anyone, a member only themself. NotFound for a user
	// who is not a member. Event: memberRemoved, which ends the removed
	// user's streams of the conversation on every server.
	RemoveMember(ctx context.Context, callerID string, conversationID uuid.UUID, userID string) error
	// ListMembers returns the conversation's owner, then its members in
	// the order they were added; for the owner and any member.
	ListMembers(ctx context.Context, callerID string, conversationID uuid.UUID) ([]Member, error)
}
