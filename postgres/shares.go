package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// shareJSON is a share as convo._share_json writes it.
type shareJSON struct {
	ID             uuid.UUID  `json:"id"`
	ConversationID uuid.UUID  `json:"conversationId"`
	CreatedBy      string     `json:"createdBy"`
	LeafMessageID  *uuid.UUID `json:"leafMessageId"`
	Mode           string     `json:"mode"`
	IncludeTools   bool       `json:"includeTools"`
	ExpiresAt      *time.Time `json:"expiresAt"`
	RevokedAt      *time.Time `json:"revokedAt"`
	CreatedAt      time.Time  `json:"createdAt"`
}

func decodeShare(raw json.RawMessage) (conversation.Share, error) {
	var j shareJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return conversation.Share{}, fmt.Errorf("decode share: %w", err)
	}
	s := conversation.Share{
		ID: j.ID, ConversationID: j.ConversationID, CreatedBy: j.CreatedBy, Mode: conversation.ShareMode(j.Mode),
		IncludeTools: j.IncludeTools, ExpiresAt: j.ExpiresAt, RevokedAt: j.RevokedAt, CreatedAt: j.CreatedAt,
	}
	if j.LeafMessageID != nil {
		s.LeafMessageID = *j.LeafMessageID
	}
	return s, nil
}

// CreateShare implements conversation.Store (convo.create_share). The
// token is made here; only its hash reaches the database.
func (s *Store) CreateShare(ctx context.Context, p conversation.CreateShareParams) (conversation.Share, string, error) {
	token, hash, err := conversation.NewShareToken()
	if err != nil {
		return conversation.Share{}, "", conversation.Errorf(conversation.Internal, "make a share token: %v", err)
	}
	params := dbq.ShareCreateParams{
		CallerID: p.CallerID, ConversationID: p.ConversationID, Mode: string(p.Mode), IncludeTools: p.IncludeTools,
		ExpiresAt: p.ExpiresAt, TokenHash: hash,
	}
	if p.LeafMessageID != uuid.Nil {
		params.LeafMessageID = uuid.NullUUID{UUID: p.LeafMessageID, Valid: true}
	}
	raw, err := s.q.ShareCreate(ctx, params)
	if err != nil {
		return conversation.Share{}, "", translate(err, "share conversation "+p.ConversationID.String())
	}
	sh, err := decodeShare(raw)
	if err != nil {
		return conversation.Share{}, "", err
	}
	return sh, token, nil
}

// ListShares implements conversation.Store (convo.list_shares).
func (s *Store) ListShares(ctx context.Context, callerID string, conversationID uuid.UUID) ([]conversation.Share, error) {
	rows, err := s.q.ShareList(ctx, dbq.ShareListParams{CallerID: callerID, ConversationID: conversationID})
	if err != nil {
		return nil, translate(err, "list the shares of conversation "+conversationID.String())
	}
	out := make([]conversation.Share, len(rows))
	for i, r := range rows {
		if out[i], err = decodeShare(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RevokeShare implements conversation.Store (convo.revoke_share).
func (s *Store) RevokeShare(ctx context.Context, callerID string, shareID uuid.UUID) (conversation.Share, error) {
	raw, err := s.q.ShareRevoke(ctx, dbq.ShareRevokeParams{CallerID: callerID, ShareID: shareID})
	if err != nil {
		return conversation.Share{}, translate(err, "revoke share "+shareID.String())
	}
	return decodeShare(raw)
}

// ShareByToken implements conversation.Store (convo.share_conversation).
func (s *Store) ShareByToken(ctx context.Context, token string) (conversation.Share, error) {
	raw, err := s.q.ShareByTokenHash(ctx, conversation.ShareTokenHash(token))
	if err != nil {
		return conversation.Share{}, translate(err, "open a share")
	}
	return decodeShare(raw)
}

// SharedConversation implements conversation.Store
// (convo.shared_conversation).
func (s *Store) SharedConversation(ctx context.Context, token string) (json.RawMessage, error) {
	raw, err := s.q.SharedConversation(ctx, conversation.ShareTokenHash(token))
	if err != nil {
		return nil, translate(err, "read a shared conversation")
	}
	return raw, nil
}

// ConversationOwner implements conversation.Store.
func (s *Store) ConversationOwner(ctx context.Context, conversationID uuid.UUID) (string, error) {
	owner, err := s.q.ConversationOwnerOf(ctx, conversationID)
	if err != nil {
		return "", translate(err, "find the owner of conversation "+conversationID.String())
	}
	return owner, nil
}

// ForkShare implements conversation.Store (convo.fork_share).
func (s *Store) ForkShare(ctx context.Context, callerID, token string) (uuid.UUID, error) {
	id, err := s.q.ShareFork(ctx, dbq.ShareForkParams{CallerID: callerID, TokenHash: conversation.ShareTokenHash(token)})
	if err != nil {
		return uuid.Nil, translate(err, "continue a shared conversation")
	}
	return id, nil
}
