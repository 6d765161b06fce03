package postgres

import (
	"context"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// RegenerateReply implements conversation.Store.
func (s *Store) RegenerateReply(ctx context.Context, p conversation.RegenerateParams) (conversation.RegenerateResult, error) {
	row, err := s.q.MessageRegenerate(ctx, dbq.MessageRegenerateParams{
		OwnerID: p.OwnerID, ConversationID: p.ConversationID, MessageID: p.MessageID, ModelConfig: p.ModelConfig,
	})
	if err != nil {
		return conversation.RegenerateResult{}, translate(err, "regenerate reply")
	}
	return conversation.RegenerateResult{MessageID: row.MessageID, PromptID: row.PromptID}, nil
}
