package postgres

import (
	"context"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// CreateConversation implements conversation.Store.
func (s *Store) CreateConversation(ctx context.Context, ownerID, title string) (conversation.Conversation, error) {
	id, err := s.q.ConversationCreate(ctx, dbq.ConversationCreateParams{OwnerID: ownerID, Title: title})
	if err != nil {
		return conversation.Conversation{}, translate(err, "create conversation")
	}
	return s.conversation(ctx, ownerID, id)
}

// EnsureConversation implements conversation.Store.
func (s *Store) EnsureConversation(ctx context.Context, ownerID string, id uuid.UUID) (conversation.Conversation, bool, error) {
	n, err := s.q.ConversationInsertIfAbsent(ctx, dbq.ConversationInsertIfAbsentParams{ID: id, OwnerID: ownerID})
	if err != nil {
		return conversation.Conversation{}, false, translate(err, "create conversation "+id.String())
	}
	// Another owner's conversation is NotFound here, as everywhere.
	c, err := s.conversation(ctx, ownerID, id)
	return c, n == 1 && err == nil, err
}

// DeleteUntouchedConversation implements conversation.Store.
func (s *Store) DeleteUntouchedConversation(ctx context.Context, ownerID string, id uuid.UUID) (bool, error) {
	n, err := s.q.ConversationDeleteUntouched(ctx, dbq.ConversationDeleteUntouchedParams{ID: id, OwnerID: ownerID})
	if err != nil {
		return false, translate(err, "delete untouched conversation "+id.String())
	}
	return n == 1, nil
}

// RenameConversation implements conversation.Store.
func (s *Store) RenameConversation(ctx context.Context, ownerID string, id uuid.UUID, title string) (conversation.Conversation, error) {
	if err := s.q.ConversationRename(ctx, dbq.ConversationRenameParams{OwnerID: ownerID, ID: id, Title: title}); err != nil {
		return conversation.Conversation{}, translate(err, "rename conversation")
	}
	return s.conversation(ctx, ownerID, id)
}

// SetSendPolicy implements conversation.Store with convo.set_send_policy.
func (s *Store) SetSendPolicy(ctx context.Context, ownerID string, id uuid.UUID, policy conversation.SendPolicy) (conversation.Conversation, error) {
	if err := s.q.ConversationSetSendPolicy(ctx, dbq.ConversationSetSendPolicyParams{OwnerID: ownerID, ID: id, Policy: string(policy)}); err != nil {
		return conversation.Conversation{}, translate(err, "set send policy")
	}
	return s.conversation(ctx, ownerID, id)
}

// ClearConversation implements conversation.Store.
func (s *Store) ClearConversation(ctx context.Context, ownerID string, id uuid.UUID) (conversation.Conversation, error) {
	if err := s.q.ConversationClear(ctx, dbq.ConversationClearParams{OwnerID: ownerID, ID: id}); err != nil {
		return conversation.Conversation{}, translate(err, "clear conversation")
	}
	return s.conversation(ctx, ownerID, id)
}

// DeleteConversation implements conversation.Store.
func (s *Store) DeleteConversation(ctx context.Context, ownerID string, id uuid.UUID) error {
	return translate(s.q.ConversationDelete(ctx, dbq.ConversationDeleteParams{OwnerID: ownerID, ID: id}), "delete conversation")
}

// ListConversations implements conversation.Store.
func (s *Store) ListConversations(ctx context.Context, ownerID string, limit int, after *conversation.PageCursor) ([]conversation.Conversation, error) {
	params := dbq.ConversationListParams{UserID: ownerID, MaxRows: int32(limit)}
	if after != nil {
		params.AfterTime, params.AfterID = &after.Time, uuid.NullUUID{UUID: after.ID, Valid: true}
	}
	rows, err := s.q.ConversationList(ctx, params)
	if err != nil {
		return nil, translate(err, "list conversations")
	}
	out := make([]conversation.Conversation, len(rows))
	for i, r := range rows {
		out[i] = conversationFromRow(dbq.ConvoConversation{
			ID: r.ID, OwnerID: r.OwnerID, Title: r.Title, ActivePromptID: r.ActivePromptID, LastSeq: r.LastSeq,
			CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, LastMessageAt: r.LastMessageAt,
		})
		out[i].Role = conversation.MemberRole(r.Role)
	}
	return out, nil
}

// Conversation implements conversation.Store.
func (s *Store) Conversation(ctx context.Context, ownerID string, id uuid.UUID) (conversation.Conversation, error) {
	return s.conversation(ctx, ownerID, id)
}

func (s *Store) conversation(ctx context.Context, ownerID string, id uuid.UUID) (conversation.Conversation, error) {
	row, err := s.q.ConversationGet(ctx, dbq.ConversationGetParams{ID: id, UserID: ownerID})
	if err != nil {
		return conversation.Conversation{}, translate(err, "read conversation "+id.String())
	}
	c := conversationFromRow(row.ConvoConversation)
	c.Role = conversation.MemberRole(row.Role)
	return c, nil
}
