package conversation

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"
)

// ShareMode is what a share link shows (docs/api.md, "Share links").
type ShareMode string

const (
	// ShareSnapshot: the path from the root to the share's leaf, frozen:
	// nothing written after the share was made appears.
	ShareSnapshot ShareMode = "snapshot"
	// ShareLive: the conversation's active path as it goes on, replies
	// in flight included.
	ShareLive ShareMode = "live"
)

// MaxSharesInForce is the most shares a conversation may have in force
// (neither revoked nor expired) at once; create_share's CV004 past it.
const MaxSharesInForce = 100

// MaxShareLifetime is the furthest ahead a share's expiry may be.
const MaxShareLifetime = 366 * 24 * time.Hour

// Share is a share link of a conversation: anyone with its token reads
// what Mode says, with no account. The token itself is never stored.
type Share struct {
	ID             uuid.UUID
	ConversationID uuid.UUID
	CreatedBy      string
	// LeafMessageID is the message a snapshot ends at (the active leaf
	// when the share was made, unless one was asked for); uuid.Nil for a
	// live share of a conversation that had no message.
	LeafMessageID uuid.UUID
	Mode          ShareMode
	// IncludeTools: tool calls' arguments and results are shown; without
	// it they are blanked.
	IncludeTools bool
	// ExpiresAt, RevokedAt: nil when none.
	ExpiresAt *time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
}

// InForce reports whether the share still opens at now.
func (s Share) InForce(now time.Time) bool {
	return s.RevokedAt == nil && (s.ExpiresAt == nil || now.Before(*s.ExpiresAt))
}

// CreateShareParams is a CreateShare request.
type CreateShareParams struct {
	CallerID       string
	ConversationID uuid.UUID
	// LeafMessageID: uuid.Nil for the conversation's active leaf.
	LeafMessageID uuid.UUID
	Mode          ShareMode
	IncludeTools  bool
	// ExpiresAt: nil for a share that lasts until revoked.
	ExpiresAt *time.Time
}

// NewShareToken returns a new share token (32 bytes from crypto/rand,
// unpadded base64url: 43 characters) and the hash that is stored of it.
func NewShareToken() (token string, hash []byte, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	token = base64.RawURLEncoding.EncodeToString(b[:])
	return token, ShareTokenHash(token), nil
}

// ShareTokenHash is what is stored of a share token: its SHA-256.
func ShareTokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Shares is what the store does with share links. Errors are *Error
// values as Members' are; a token that opens no share (unknown, revoked,
// expired) is NotFound, the same for all three.
type Shares interface {
	// CreateShare makes a share link (the owner or a participant) and
	// returns it with its token, which is never returned again. NotFound
	// for a leaf that is not a message of the conversation; Invalid for a
	// bad mode or expiry, or a snapshot of an empty conversation;
	// ResourceExhausted past MaxSharesInForce. Event: shareCreated.
	CreateShare(ctx context.Context, p CreateShareParams) (Share, string, error)
	// ListShares returns the conversation's shares, newest first (revoked
	// and expired ones too); the owner and participants.
	ListShares(ctx context.Context, callerID string, conversationID uuid.UUID) ([]Share, error)
	// RevokeShare ends a share now: its creator or the conversation's
	// owner. Revoking a revoked share returns it unchanged. Event:
	// shareRevoked, which ends the share's streams on every server.
	RevokeShare(ctx context.Context, callerID string, shareID uuid.UUID) (Share, error)
	// ShareByToken returns the share token opens, when in force.
	ShareByToken(ctx context.Context, token string) (Share, error)
	// SharedConversation returns what the share token opens shows, in the
	// proto3 JSON of the API's GetSharedConversationResponse (docs/api.md,
	// "Share links"): tool blocks blanked unless the share includes tools.
	SharedConversation(ctx context.Context, token string) (json.RawMessage, error)
	// ForkShare copies what the share token opens shows into a new
	// conversation of callerID and returns its id (convo.fork_share: file
	// blocks, a comparison's other reply and messages still being written
	// are left out). Invalid when the share shows no message.
	ForkShare(ctx context.Context, callerID, token string) (uuid.UUID, error)
	// ConversationOwner returns the conversation's owner, whose reads a
	// share's stream makes; NotFound when it does not exist.
	ConversationOwner(ctx context.Context, conversationID uuid.UUID) (string, error)
}

// RedactedPath returns a request's URL path fit for logs and traces: a
// share token in it (GET /v1/shares/{token}, …/events) is replaced by
// "{token}", since whoever reads the log could read the conversation
// with it.
func RedactedPath(path string) string {
	const prefix = "/v1/shares/"
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok || rest == "" {
		return path
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return prefix + "{token}" + rest[i:]
	}
	return prefix + "{token}"
}
