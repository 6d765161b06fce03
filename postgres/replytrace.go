package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/postgres/dbq"
)

// ReplyTraceContexts implements conversation.Store.
func (s *Store) ReplyTraceContexts(ctx context.Context, ownerID string, messageIDs []uuid.UUID) (map[uuid.UUID]map[string]string, error) {
	rows, err := s.q.ReplyTraceContexts(ctx, dbq.ReplyTraceContextsParams{UserID: ownerID, MessageIds: messageIDs})
	if err != nil {
		return nil, translate(err, "read reply trace contexts")
	}
	out := make(map[uuid.UUID]map[string]string, len(rows))
	for _, r := range rows {
		// convo.send_messages keeps only objects of strings
		// (convo._check_trace_context); anything else is a bug.
		var carrier map[string]string
		if err := json.Unmarshal(r.TraceContext, &carrier); err != nil {
			return nil, fmt.Errorf("trace context of message %s: %w", r.MessageID, err)
		}
		out[r.MessageID] = carrier
	}
	return out, nil
}
