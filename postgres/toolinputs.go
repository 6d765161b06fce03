package postgres

import (
	"context"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

// ToolCallInputs implements conversation.Store.
func (s *Store) ToolCallInputs(ctx context.Context, toolCallIDs []uuid.UUID) ([]conversation.InputRequest, error) {
	if len(toolCallIDs) == 0 {
		return nil, nil
	}
	rows, err := s.q.ToolCallInputs(ctx, toolCallIDs)
	if err != nil {
		return nil, translate(err, "read the input requests of tool calls")
	}
	out := make([]conversation.InputRequest, len(rows))
	for i, r := range rows {
		out[i] = conversation.InputRequest{ToolCallID: r.ToolCallID, Kind: conversation.InputKind(r.Kind),
			Status: conversation.InputStatus(r.Status), Answer: r.Answer}
	}
	return out, nil
}
