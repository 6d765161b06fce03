package postgres

import (
	"context"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// Trace implements conversation.Store: the prompt and its events, read in
// one snapshot so the events match the prompt's status.
func (s *Store) Trace(ctx context.Context, ownerID string, promptID, messageID uuid.NullUUID) (conversation.Trace, error) {
	var tr conversation.Trace
	err := s.readSnapshot(ctx, func(q *dbq.Queries) error {
		p, err := q.PromptGet(ctx, dbq.PromptGetParams{UserID: ownerID, PromptID: promptID, MessageID: messageID})
		if err != nil {
			return err
		}
		events, err := q.EventListByPrompt(ctx, dbq.EventListByPromptParams{ConversationID: p.ConversationID, PromptID: p.ID})
		if err != nil {
			return err
		}
		tr = conversation.Trace{Prompt: promptFromRow(p), Events: eventsFromRows(events)}
		return nil
	})
	if err != nil {
		return conversation.Trace{}, translate(err, "read trace")
	}
	return tr, nil
}

func promptFromRow(p dbq.PromptGetRow) conversation.Prompt {
	out := conversation.Prompt{
		ID: p.ID, ConversationID: p.ConversationID, MessageID: p.MessageID,
		Status: conversation.PromptStatus(p.Status), ModelConfig: p.ModelConfig,
		CreatedAt: p.CreatedAt, StartedAt: p.StartedAt, EndedAt: p.EndedAt,
	}
	if p.Error != nil {
		out.Error = *p.Error
	}
	return out
}
