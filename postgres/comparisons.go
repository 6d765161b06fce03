package postgres

import (
	"context"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// VoteComparison implements conversation.Store.
func (s *Store) VoteComparison(ctx context.Context, ownerID string, id uuid.UUID, preference conversation.Preference) (conversation.Comparison, error) {
	err := s.q.ComparisonVote(ctx, dbq.ComparisonVoteParams{OwnerID: ownerID, ID: id, Preference: string(preference)})
	if err != nil {
		return conversation.Comparison{}, translate(err, "vote comparison")
	}
	rows, err := s.q.ComparisonList(ctx, dbq.ComparisonListParams{
		UserID: ownerID, OnlyID: uuid.NullUUID{UUID: id, Valid: true}, MaxRows: 1,
	})
	if err != nil {
		return conversation.Comparison{}, translate(err, "read comparison")
	}
	if len(rows) == 0 {
		return conversation.Comparison{}, conversation.Errorf(conversation.NotFound, "comparison %s does not exist", id)
	}
	return comparisonFromRow(rows[0]), nil
}

// ListComparisons implements conversation.Store.
func (s *Store) ListComparisons(ctx context.Context, ownerID string, conversationID uuid.NullUUID, limit int, after *conversation.PageCursor) ([]conversation.Comparison, error) {
	params := dbq.ComparisonListParams{UserID: ownerID, ConversationID: conversationID, MaxRows: int32(limit)}
	if after != nil {
		params.AfterTime, params.AfterID = &after.Time, uuid.NullUUID{UUID: after.ID, Valid: true}
	}
	rows, err := s.q.ComparisonList(ctx, params)
	if err != nil {
		return nil, translate(err, "list comparisons")
	}
	out := make([]conversation.Comparison, len(rows))
	for i, r := range rows {
		out[i] = comparisonFromRow(r)
	}
	return out, nil
}

func comparisonFromRow(r dbq.ComparisonListRow) conversation.Comparison {
	c := conversation.Comparison{
		ID: r.ID, ConversationID: r.ConversationID, UserMessageID: r.UserMessageID,
		A: conversation.ComparisonSide{
			PromptID: r.APromptID, MessageID: r.AMessageID, ModelConfig: r.AModelConfig,
			Status: conversation.PromptStatus(r.AStatus),
		},
		B: conversation.ComparisonSide{
			PromptID: r.BPromptID, MessageID: r.BMessageID, ModelConfig: r.BModelConfig,
			Status: conversation.PromptStatus(r.BStatus),
		},
		VotedAt: r.VotedAt, CreatedAt: r.CreatedAt,
	}
	if r.Preference != nil {
		c.Preference = conversation.Preference(*r.Preference)
	}
	return c
}
