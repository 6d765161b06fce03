package postgres_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

func TestEnsureConversation(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	id := uuid.New()

	created, err := tb.store.EnsureConversation(ctx, "alice", id)
	if err != nil {
		t.Fatal(err)
	}
	if created.ID != id || created.OwnerID != "alice" || created.Title != "" || created.LastSeq != 0 {
		t.Fatalf("created %+v; want an empty conversation %s of alice", created, id)
	}
	// Again: the same conversation, untouched, and usable like any other.
	sent, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: "alice", ConversationID: id, Text: "hi", ModelConfigs: []json.RawMessage{json.RawMessage("{}")},
	})
	if err != nil || sent.ConversationID != id {
		t.Fatalf("send to the ensured conversation: %v, %v", sent, err)
	}
	again, err := tb.store.EnsureConversation(ctx, "alice", id)
	if err != nil || again.Title != "hi" || again.LastSeq == 0 {
		t.Fatalf("ensure again = %+v, %v; want the existing conversation", again, err)
	}
	// Another owner's id is NotFound, exactly as an unknown id elsewhere.
	if _, err := tb.store.EnsureConversation(ctx, "mallory", id); conversation.ErrorCode(err) != conversation.NotFound {
		t.Fatalf("another owner's id: %v, want NotFound", err)
	}
}
