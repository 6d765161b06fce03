package postgres

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// appendedMessage is a message as convo.append_messages reads it.
type appendedMessage struct {
	Role    string      `json:"role"`
	Text    string      `json:"text"`
	FileIDs []uuid.UUID `json:"fileIds,omitempty"`
}

// AppendMessages implements conversation.Store with convo.append_messages.
func (s *Store) AppendMessages(ctx context.Context, p conversation.AppendMessagesParams) ([]uuid.UUID, error) {
	items := make([]appendedMessage, len(p.Messages))
	for i, m := range p.Messages {
		items[i] = appendedMessage{Role: string(m.Role), Text: m.Text, FileIDs: m.FileIDs}
	}
	raw, err := json.Marshal(items)
	if err != nil {
		return nil, err
	}
	ids, err := s.q.MessagesAppend(ctx, dbq.MessagesAppendParams{OwnerID: p.OwnerID, ConversationID: p.ConversationID, Items: raw})
	if err != nil {
		return nil, translate(err, "append messages to conversation "+p.ConversationID.String())
	}
	return ids, nil
}

// DeleteMessage implements conversation.Store with convo.delete_message.
func (s *Store) DeleteMessage(ctx context.Context, ownerID string, conversationID, messageID uuid.UUID) error {
	err := s.changePath(ctx, func(q *dbq.Queries) error {
		return q.MessageDelete(ctx, dbq.MessageDeleteParams{OwnerID: ownerID, ConversationID: conversationID, MessageID: messageID})
	})
	return translate(err, "delete message "+messageID.String())
}
