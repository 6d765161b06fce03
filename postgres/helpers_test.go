package postgres_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

func appendParams(blockID uuid.UUID, delta string) apiq.BlockAppendParams {
	return apiq.BlockAppendParams{BlockID: blockID, Delta: delta}
}

func deltaContent(t testing.TB, e conversation.Event) string {
	t.Helper()
	var d struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(e.Payload, &d); err != nil {
		t.Fatalf("blockDelta payload %s: %v", e.Payload, err)
	}
	return d.Content
}
