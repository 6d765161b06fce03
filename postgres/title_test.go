package postgres_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

// titleEvents are the titles the conversationUpdated events after the
// first before events of the log carry, in order.
func (tb *testBundle) titleEvents(t *testing.T, conv uuid.UUID, before int) []string {
	t.Helper()
	var out []string
	for _, e := range tb.events(t, conv)[before:] {
		if e.Kind != conversation.EventConversationUpdated {
			continue
		}
		var p struct {
			Conversation struct {
				Title string `json:"title"`
			} `json:"conversation"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Conversation.Title)
	}
	return out
}

// TestTitleFollowsFirstMessage: a title taken from the first message
// follows an edit of that message, and a switch between its versions,
// with a conversationUpdated event that carries it; an edit of a later
// message leaves it, and so does every change once the owner renamed the
// conversation.
func TestTitleFollowsFirstMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	u1, a1 := tb.turn(t, uuid.Nil, "Which fruit should I eat?\nI like sweet ones.")
	conv := a1.conversationID
	u2, _ := tb.turn(t, conv, "and for dessert?")
	title := func() string { return tb.state(t, conv).Conversation.Title }
	if got := title(); got != "Which fruit should I eat?" {
		t.Fatalf("title = %q; want the first line of the first message", got)
	}

	// An edit of a later message: the title stays, no title event.
	before := len(tb.events(t, conv))
	ed, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: u2, Text: "and for lunch?"})
	if err != nil {
		t.Fatal(err)
	}
	if got, events := title(), tb.titleEvents(t, conv, before); got != "Which fruit should I eat?" || len(events) != 1 || events[0] != got {
		t.Errorf("after an edit of the second message: title %q, conversationUpdated titles %q; want it unchanged (only the queued reply's event)", got, events)
	}
	tb.answerWith(t, ed.PromptID, "re: lunch")

	// An edit of the first message: the title follows, in an event.
	before = len(tb.events(t, conv))
	ed, err = tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: u1, Text: "  Name a colour.\nAny will do."})
	if err != nil {
		t.Fatal(err)
	}
	if got, events := title(), tb.titleEvents(t, conv, before); got != "Name a colour." || len(events) != 2 || events[0] != got || events[1] != got {
		t.Errorf("after an edit of the first message: title %q, conversationUpdated titles %q; want %q (the title's event, then the queued reply's)", got, events, "Name a colour.")
	}
	tb.answerWith(t, ed.PromptID, "re: colour")

	// A switch back to the first version, and forth again.
	before = len(tb.events(t, conv))
	if _, err := tb.store.SwitchBranch(ctx, "local", conv, u1); err != nil {
		t.Fatal(err)
	}
	if got, events := title(), tb.titleEvents(t, conv, before); got != "Which fruit should I eat?" || len(events) != 1 || events[0] != got {
		t.Errorf("after a switch back: title %q, conversationUpdated titles %q; want the first version's", got, events)
	}
	if _, err := tb.store.SwitchBranch(ctx, "local", conv, ed.UserMessageID); err != nil {
		t.Fatal(err)
	}
	if got := title(); got != "Name a colour." {
		t.Errorf("after a switch to the edit: title %q", got)
	}

	// Renamed: the owner's title stays through edits and switches.
	if _, err := tb.store.RenameConversation(ctx, "local", conv, "My title"); err != nil {
		t.Fatal(err)
	}
	before = len(tb.events(t, conv))
	ed, err = tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: ed.UserMessageID, Text: "Something else"})
	if err != nil {
		t.Fatal(err)
	}
	tb.answerWith(t, ed.PromptID, "re: else")
	if _, err := tb.store.SwitchBranch(ctx, "local", conv, u1); err != nil {
		t.Fatal(err)
	}
	for _, e := range tb.titleEvents(t, conv, before) {
		if e != "My title" {
			t.Errorf("a renamed conversation's event carries title %q", e)
		}
	}
	if got := title(); got != "My title" {
		t.Errorf("a renamed conversation's title became %q after an edit and a switch", got)
	}
}
