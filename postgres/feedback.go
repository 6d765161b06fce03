package postgres

import (
	"context"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// SubmitFeedback implements conversation.Store.
func (s *Store) SubmitFeedback(ctx context.Context, ownerID string, messageID uuid.UUID, rating conversation.Rating, comment string) (conversation.Message, error) {
	err := s.q.MessageSetFeedback(ctx, dbq.MessageSetFeedbackParams{
		OwnerID: ownerID, MessageID: messageID, Rating: string(rating), Comment: comment,
	})
	if err != nil {
		return conversation.Message{}, translate(err, "submit feedback")
	}
	row, err := s.q.MessageGet(ctx, dbq.MessageGetParams{ID: messageID, UserID: ownerID})
	if err != nil {
		return conversation.Message{}, translate(err, "read message "+messageID.String())
	}
	return messageFromRow(dbq.MessageListByConversationRow(row)), nil
}
