package postgres

import (
	"context"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// AddMember implements conversation.Store (convo.add_member).
func (s *Store) AddMember(ctx context.Context, callerID string, conversationID uuid.UUID, userID string, role conversation.MemberRole) (conversation.Member, error) {
	row, err := s.q.MemberAdd(ctx, dbq.MemberAddParams{
		CallerID: callerID, ConversationID: conversationID, UserID: userID, Role: string(role),
	})
	if err != nil {
		return conversation.Member{}, translate(err, "add a member to conversation "+conversationID.String())
	}
	return conversation.Member{UserID: row.UserID, Role: conversation.MemberRole(row.Role), AddedAt: row.AddedAt, AddedBy: row.AddedBy}, nil
}

// RemoveMember implements conversation.Store (convo.remove_member).
func (s *Store) RemoveMember(ctx context.Context, callerID string, conversationID uuid.UUID, userID string) error {
	err := s.q.MemberRemove(ctx, dbq.MemberRemoveParams{CallerID: callerID, ConversationID: conversationID, UserID: userID})
	return translate(err, "remove a member from conversation "+conversationID.String())
}

// ListMembers implements conversation.Store.
func (s *Store) ListMembers(ctx context.Context, callerID string, conversationID uuid.UUID) ([]conversation.Member, error) {
	rows, err := s.q.MemberList(ctx, dbq.MemberListParams{ConversationID: conversationID, UserID: callerID})
	if err != nil {
		return nil, translate(err, "list the members of conversation "+conversationID.String())
	}
	if len(rows) == 0 {
		return nil, conversation.Errorf(conversation.NotFound, "conversation %s does not exist", conversationID)
	}
	out := make([]conversation.Member, len(rows))
	for i, r := range rows {
		out[i] = conversation.Member{UserID: r.UserID, Role: conversation.MemberRole(r.Role), AddedAt: r.AddedAt, AddedBy: r.AddedBy}
	}
	return out, nil
}
