package postgres

import (
	"context"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// DeleteResponse implements conversation.Store with convo.delete_response.
func (s *Store) DeleteResponse(ctx context.Context, ownerID string, promptID uuid.UUID) error {
	err := s.q.ResponseDelete(ctx, dbq.ResponseDeleteParams{OwnerID: ownerID, PromptID: promptID})
	return translate(err, "delete response "+promptID.String())
}

// ResponseDeleted implements conversation.Store.
func (s *Store) ResponseDeleted(ctx context.Context, promptID uuid.UUID) (bool, error) {
	deleted, err := s.q.ResponseDeleted(ctx, promptID)
	if err != nil {
		return false, translate(err, "read whether response "+promptID.String()+" was deleted")
	}
	return deleted, nil
}

// PromptInput implements conversation.Store.
func (s *Store) PromptInput(ctx context.Context, ownerID string, promptID uuid.UUID) (conversation.PromptInput, error) {
	row, err := s.q.PromptInputMessage(ctx, dbq.PromptInputMessageParams{PromptID: promptID, OwnerID: ownerID})
	if err != nil {
		return conversation.PromptInput{}, translate(err, "read the input of prompt "+promptID.String())
	}
	return conversation.PromptInput{MessageID: row.ID, Text: row.Text, CreatedAt: row.CreatedAt}, nil
}
