package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

// TestSwitchVersion steps between the versions of a turn by their place
// ("‹ n / m ›"), naming any version of the turn and the index wanted, as a
// client that holds only the active path does: the result is what
// SwitchBranch to that version gives, comparisons count once, and the
// first messages of a conversation are a turn too.
func TestSwitchVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	u1, a1 := tb.turn(t, uuid.Nil, "one")
	conv := a1.conversationID
	_, a2 := tb.turn(t, conv, "two")
	re, err := tb.store.RegenerateReply(ctx, conversation.RegenerateParams{OwnerID: "local", ConversationID: conv})
	if err != nil {
		t.Fatal(err)
	}
	tb.answerWith(t, re.PromptID, "encore two")
	ed, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: u1, Text: "uno"})
	if err != nil {
		t.Fatal(err)
	}
	tb.answerWith(t, ed.PromptID, "re: uno")

	steps := []struct {
		name     string
		message  uuid.UUID
		index    int
		wantLeaf uuid.UUID
		wantPath string
	}{
		// From the shown version 2 of the first turn to version 1: the
		// newest leaf below it, the regenerated reply.
		{"first turn, version 1", ed.UserMessageID, 0, re.MessageID, "one ‹1/2› | re: one | two | encore two ‹2/2›"},
		{"a reply, version 1", re.MessageID, 0, a2.messageID, "one ‹1/2› | re: one | two | re: two ‹1/2›"},
		{"a reply, version 2", a2.messageID, 1, re.MessageID, "one ‹1/2› | re: one | two | encore two ‹2/2›"},
		// Named by a version off the path: the turn is the same.
		{"first turn by its hidden version", ed.UserMessageID, 1, ed.AssistantMessageID, "uno ‹2/2› | re: uno"},
		{"the version shown", u1, 1, ed.AssistantMessageID, "uno ‹2/2› | re: uno"},
	}
	for _, s := range steps {
		leaf, err := tb.store.SwitchVersion(ctx, "local", conv, s.message, s.index)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if leaf != s.wantLeaf {
			t.Errorf("%s: leaf %s; want %s", s.name, leaf, s.wantLeaf)
		}
		if got := pathText(tb.state(t, conv)); got != s.wantPath {
			t.Errorf("%s: path = %q; want %q", s.name, got, s.wantPath)
		}
		// The same switch by the version's own id lands on the same leaf.
		var version uuid.UUID
		if err := tb.pool.QueryRow(ctx, `SELECT m.id FROM convo.messages m, convo.messages n
			WHERE n.id = $1 AND m.conversation_id = n.conversation_id AND m.parent_id IS NOT DISTINCT FROM n.parent_id
			  AND m.comparison_slot IS DISTINCT FROM 'b' ORDER BY m.position OFFSET $2 LIMIT 1`, s.message, s.index).Scan(&version); err != nil {
			t.Fatal(err)
		}
		if byID, err := tb.store.SwitchBranch(ctx, "local", conv, version); err != nil || byID != leaf {
			t.Errorf("%s: SwitchBranch to version %s = %s, %v; want %s as SwitchVersion", s.name, version, byID, err, leaf)
		}
	}

	// A comparison's two replies are one version: version 1 of the turn
	// below an edited message that was answered by a pair shows the pair.
	res, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: "local", Text: "pick", ModelConfigs: []json.RawMessage{json.RawMessage(`{}`), json.RawMessage(`{}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	tb.answerAll(t, map[uuid.UUID]string{res.PromptIDs[0]: "A", res.PromptIDs[1]: "B"})
	pair := res.ConversationID
	edPair, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: pair, MessageID: res.UserMessageID, Text: "choose"})
	if err != nil {
		t.Fatal(err)
	}
	tb.answerWith(t, edPair.PromptID, "C")
	if leaf, err := tb.store.SwitchVersion(ctx, "local", pair, edPair.UserMessageID, 0); err != nil || leaf != res.AssistantMessageIDs[0] {
		t.Fatalf("switch to the compared version = %s, %v; want slot a %s", leaf, err, res.AssistantMessageIDs[0])
	}
	if got, want := pathText(tb.state(t, pair)), "pick ‹1/2› | A | B"; got != want {
		t.Errorf("the compared version: path = %q; want %q", got, want)
	}
	if leaf, err := tb.store.SwitchVersion(ctx, "local", pair, res.AssistantMessageIDs[1], 0); err != nil || leaf != res.AssistantMessageIDs[0] {
		t.Errorf("version 1 of slot b's turn = %s, %v; want the pair's slot a %s (one version)", leaf, err, res.AssistantMessageIDs[0])
	}
}

// TestSwitchVersionRefusals: an index outside the turn's versions, a
// message of another conversation or owner, and a switch while a reply
// streams are refused with their codes, saying why, and change nothing.
func TestSwitchVersionRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	u1, a1 := tb.turn(t, uuid.Nil, "one")
	conv := a1.conversationID
	ed, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: u1, Text: "uno"})
	if err != nil {
		t.Fatal(err)
	}
	tb.answerWith(t, ed.PromptID, "re: uno")
	other := tb.sendMessage(t, uuid.Nil, "streams")

	cases := []struct {
		name    string
		owner   string
		conv    uuid.UUID
		message uuid.UUID
		index   int
		code    conversation.Code
		says    string
	}{
		{"an index past the versions", "local", conv, u1, 2, conversation.Invalid, "siblingIndex 2 is out of range: the turn of message " + u1.String() + " has 2 version(s)"},
		{"a negative index", "local", conv, u1, -1, conversation.Invalid, "siblingIndex"},
		{"the only version's next", "local", conv, ed.AssistantMessageID, 1, conversation.Invalid, "has 1 version(s)"},
		{"a message of another conversation", "local", conv, other.messageID, 0, conversation.NotFound, "is not a message of conversation"},
		{"another owner's conversation", "mallory", conv, u1, 0, conversation.NotFound, "does not exist"},
		{"while a reply streams", "local", other.conversationID, other.messageID, 0, conversation.FailedPrecondition, "is still being written"},
	}
	for _, c := range cases {
		fp := tb.treeFingerprint(t)
		_, err := tb.store.SwitchVersion(ctx, c.owner, c.conv, c.message, c.index)
		if conversation.ErrorCode(err) != c.code || err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want %s saying %q", c.name, err, c.code, c.says)
		}
		if tb.treeFingerprint(t) != fp {
			t.Errorf("%s changed something", c.name)
		}
	}
}
