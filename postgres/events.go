package postgres

import (
	"context"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// EventsAfter implements conversation.Store.
func (s *Store) EventsAfter(ctx context.Context, conversationID uuid.UUID, afterSeq int64, limit int) ([]conversation.Event, error) {
	rows, err := s.q.EventListAfter(ctx, dbq.EventListAfterParams{
		ConversationID: conversationID, AfterSeq: afterSeq, MaxEvents: int32(limit),
	})
	if err != nil {
		return nil, translate(err, "list events")
	}
	return eventsFromRows(rows), nil
}

// EventsAfterMany implements conversation.Store.
func (s *Store) EventsAfterMany(ctx context.Context, cursors []conversation.Cursor, limit int) ([]conversation.Event, error) {
	ids := make([]uuid.UUID, len(cursors))
	seqs := make([]int64, len(cursors))
	for i, c := range cursors {
		ids[i], seqs[i] = c.ConversationID, c.AfterSeq
	}
	rows, err := s.q.EventListAfterMany(ctx, dbq.EventListAfterManyParams{
		ConversationIds: ids, AfterSeqs: seqs, MaxEvents: int32(limit),
	})
	if err != nil {
		return nil, translate(err, "list events")
	}
	return eventsFromRows(rows), nil
}

func eventsFromRows(rows []dbq.ConvoEvent) []conversation.Event {
	events := make([]conversation.Event, len(rows))
	for i, r := range rows {
		events[i] = conversation.Event{
			ConversationID: r.ConversationID, Seq: r.Seq, Kind: conversation.EventKind(r.Kind),
			PromptID: r.PromptID, BlockID: r.BlockID, ToolCallID: r.ToolCallID,
			Payload: r.Payload, CreatedAt: r.CreatedAt,
		}
	}
	return events
}

// ExistingConversations implements stream.Store: which of ids exist.
func (s *Store) ExistingConversations(ctx context.Context, ids []uuid.UUID) ([]uuid.UUID, error) {
	existing, err := s.q.ConversationIDsExisting(ctx, ids)
	if err != nil {
		return nil, translate(err, "look up conversations")
	}
	return existing, nil
}
