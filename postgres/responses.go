package postgres

import (
	"context"
	"encoding/json"
	"fmt"

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
	in := conversation.PromptInput{MessageID: row.ID, Text: row.Text, CreatedAt: row.CreatedAt}
	if err := json.Unmarshal(row.Files, &in.Files); err != nil {
		return conversation.PromptInput{}, fmt.Errorf("read the files of message %s: %w", row.ID, err)
	}
	return in, nil
}

// ConversationMetadata implements conversation.Store.
func (s *Store) ConversationMetadata(ctx context.Context, conversationID uuid.UUID) (json.RawMessage, error) {
	m, err := s.q.ConversationMetadataGet(ctx, conversationID)
	if err != nil {
		return nil, translate(err, "read the metadata of conversation "+conversationID.String())
	}
	return m, nil
}

// SetConversationMetadata implements conversation.Store.
func (s *Store) SetConversationMetadata(ctx context.Context, ownerID string, conversationID uuid.UUID, metadata json.RawMessage) error {
	n, err := s.q.ConversationMetadataSet(ctx, dbq.ConversationMetadataSetParams{
		ConversationID: conversationID, OwnerID: ownerID, Metadata: metadata})
	if err != nil {
		return translate(err, "set the metadata of conversation "+conversationID.String())
	}
	if n == 0 {
		return conversation.Errorf(conversation.NotFound, "conversation %s does not exist", conversationID)
	}
	return nil
}
