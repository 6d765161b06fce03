package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

func TestEnsureConversation(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	id := uuid.New()

	created, isNew, err := tb.store.EnsureConversation(ctx, "alice", id)
	if err != nil || !isNew {
		t.Fatalf("ensure a new id: created %v, %v", isNew, err)
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
	again, isNew, err := tb.store.EnsureConversation(ctx, "alice", id)
	if err != nil || isNew || again.Title != "hi" || again.LastSeq == 0 {
		t.Fatalf("ensure again = %+v (created %v), %v; want the existing conversation", again, isNew, err)
	}
	// Another owner's id is NotFound, exactly as an unknown id elsewhere.
	if _, isNew, err := tb.store.EnsureConversation(ctx, "mallory", id); isNew || conversation.ErrorCode(err) != conversation.NotFound {
		t.Fatalf("another owner's id: created %v, %v; want NotFound", isNew, err)
	}
}

func TestDeleteUntouchedConversation(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	untouched, _, err := tb.store.EnsureConversation(ctx, "alice", uuid.New())
	if err != nil {
		t.Fatal(err)
	}
	used, _, err := tb.store.EnsureConversation(ctx, "alice", uuid.New())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.store.RenameConversation(ctx, "alice", used.ID, "named"); err != nil {
		t.Fatal(err)
	}
	// Written to (one event), another owner's, or gone: kept, or nothing.
	for _, c := range []struct {
		owner string
		id    uuid.UUID
	}{{"alice", used.ID}, {"mallory", untouched.ID}, {"alice", uuid.New()}} {
		if deleted, err := tb.store.DeleteUntouchedConversation(ctx, c.owner, c.id); err != nil || deleted {
			t.Errorf("%s's %s: deleted %v, %v; want kept", c.owner, c.id, deleted, err)
		}
	}
	if deleted, err := tb.store.DeleteUntouchedConversation(ctx, "alice", untouched.ID); err != nil || !deleted {
		t.Fatalf("the untouched conversation: deleted %v, %v", deleted, err)
	}
	if _, err := tb.store.Conversation(ctx, "alice", untouched.ID); conversation.ErrorCode(err) != conversation.NotFound {
		t.Errorf("after the delete: %v; want NotFound", err)
	}
	if _, err := tb.store.Conversation(ctx, "alice", used.ID); err != nil {
		t.Errorf("the conversation written to: %v", err)
	}
}

// TestTitleFromFirstMessage checks the title a conversation takes from
// its first message: its first line with something visible, with its
// control characters made spaces and trimmed.
func TestTitleFromFirstMessage(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	for text, want := range map[string]string{
		"What is 6 times 7?\nThanks":              "What is 6 times 7?",
		"\u200b\u202e\r\n\tHello\tworld \r\nmore": "Hello world",
		"\x1b[31mred\x1b[0m\a":                    "[31mred [0m",
		"  \u00a0\u3000spaced\u2003":              "spaced",
		strings.Repeat("long ", 30):               strings.TrimSpace(strings.Repeat("long ", 16)),
	} {
		sent, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{
			OwnerID: "alice", Text: text, ModelConfigs: []json.RawMessage{json.RawMessage("{}")},
		})
		if err != nil {
			t.Fatalf("%+q: %v", text, err)
		}
		c, err := tb.store.Conversation(ctx, "alice", sent.ConversationID)
		if err != nil {
			t.Fatal(err)
		}
		if c.Title != want {
			t.Errorf("%+q: title %+q; want %+q", text, c.Title, want)
		}
	}
}
