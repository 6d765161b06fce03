package postgres

import (
	"context"
	"encoding/json"
	"math"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// SendMessage implements conversation.Store.
func (s *Store) SendMessage(ctx context.Context, p conversation.SendMessageParams) (conversation.SendMessageResult, error) {
	configs, err := json.Marshal(p.ModelConfigs)
	if err != nil {
		return conversation.SendMessageResult{}, conversation.Errorf(conversation.Invalid, "model configuration is not valid JSON")
	}
	row, err := s.q.MessageSend(ctx, dbq.MessageSendParams{
		OwnerID:         p.OwnerID,
		ConversationID:  uuid.NullUUID{UUID: p.ConversationID, Valid: p.ConversationID != uuid.Nil},
		Text:            p.Text,
		ModelConfigs:    configs,
		ParentMessageID: uuid.NullUUID{UUID: p.ParentMessageID, Valid: p.ParentMessageID != uuid.Nil},
		FileIds:         nonNil(p.FileIDs),
	})
	if err != nil {
		return conversation.SendMessageResult{}, translate(err, "send message")
	}
	return conversation.SendMessageResult{
		ConversationID:      row.ConversationID,
		UserMessageID:       row.UserMessageID,
		AssistantMessageIDs: row.AssistantMessageIds,
		PromptIDs:           row.PromptIds,
		ComparisonID:        uuid.NullUUID{UUID: row.ComparisonID, Valid: row.ComparisonID != uuid.Nil},
	}, nil
}

// CancelPrompt implements conversation.Store.
func (s *Store) CancelPrompt(ctx context.Context, ownerID string, promptID uuid.UUID) (bool, error) {
	cancelled, err := s.q.PromptCancel(ctx, dbq.PromptCancelParams{PromptID: promptID, OwnerID: ownerID})
	if err != nil {
		return false, translate(err, "cancel prompt "+promptID.String())
	}
	return cancelled, nil
}

// ExpireLeases fails running prompts whose lease expired (see
// convo.expire_leases) and returns how many.
func (s *Store) ExpireLeases(ctx context.Context) (int, error) {
	n, err := s.q.PromptExpireLeases(ctx)
	if err != nil {
		return 0, translate(err, "expire leases")
	}
	return int(n), nil
}

// SetMaxActivePrompts sets the cap on prompts one owner may have queued or
// running at once, which convo.send_message enforces for every server and
// client of the database (0: no cap). SendMessage past it fails with
// conversation.ResourceExhausted and queues nothing.
func (s *Store) SetMaxActivePrompts(ctx context.Context, n int) error {
	if n < 0 || n > math.MaxInt32 {
		return conversation.Errorf(conversation.Invalid, "max active prompts: want 0 or more, got %d", n)
	}
	if err := s.q.LimitsSetMaxActivePrompts(ctx, int32(n)); err != nil {
		return translate(err, "set max active prompts")
	}
	return nil
}

// nonNil is ids, or an empty list for none (a nil slice is SQL NULL).
func nonNil(ids []uuid.UUID) []uuid.UUID {
	if ids == nil {
		return []uuid.UUID{}
	}
	return ids
}
