package connectapi_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// sendBelow sends text to conversationID naming parent as the active leaf
// the client shows (SendMessageRequest.parent_message_id).
func (tb *testBundle) sendBelow(conversationID, parent, text string) (*convov1.SendMessageResponse, error) {
	res, err := tb.client.SendMessage(context.Background(), connect.NewRequest(&convov1.SendMessageRequest{
		ConversationId: conversationID, Text: text, ParentMessageId: parent,
	}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// parentOf is the parent of message id on the conversation's active path.
func (tb *testBundle) parentOf(t *testing.T, conversationID, id string) string {
	t.Helper()
	for _, m := range tb.state(t, conversationID).Messages {
		if m.Id == id {
			return m.ParentId
		}
	}
	t.Fatalf("message %s is not on the active path of %s", id, conversationID)
	return ""
}

// TestSendMessageParent: a SendMessage naming the active leaf the client
// shows is refused, changing nothing, when another tab moved the
// conversation on (here: an edit made a new branch); naming the current
// leaf, or no leaf at all, it lands below the current leaf.
func TestSendMessageParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	one := tb.send(t, tb.client, "", "one")
	conv := one.ConversationId
	tb.writeReply(t, one.PromptId, "re: one")
	// Tab B edits the first message: tab A still shows "one" and its reply.
	ed, err := tb.client.EditMessage(ctx, connect.NewRequest(&convov1.EditMessageRequest{ConversationId: conv, MessageId: one.UserMessageId, Text: "uno"}))
	if err != nil {
		t.Fatal(err)
	}
	tb.writeReply(t, ed.Msg.PromptId, "re: uno")

	before := tb.countRows(t)
	_, err = tb.sendBelow(conv, one.AssistantMessageId, "two")
	ce := requireCode(t, err, connect.CodeFailedPrecondition)
	for _, says := range []string{"parentMessageId", one.AssistantMessageId, "the active leaf is now " + ed.Msg.AssistantMessageId} {
		if !strings.Contains(ce.Message(), says) {
			t.Errorf("refusal %q does not say %q", ce.Message(), says)
		}
	}
	if after := tb.countRows(t); after != before {
		t.Errorf("a refused send changed something: %s → %s", before, after)
	}

	// Naming the current leaf: accepted, below it.
	two, err := tb.sendBelow(conv, ed.Msg.AssistantMessageId, "two")
	if err != nil {
		t.Fatalf("send below the current leaf: %v", err)
	}
	if p := tb.parentOf(t, conv, two.UserMessageId); p != ed.Msg.AssistantMessageId {
		t.Errorf("the message hangs below %s; want %s", p, ed.Msg.AssistantMessageId)
	}
	tb.writeReply(t, two.PromptId, "re: two")
	// Unset: no check, as before the field existed.
	three := tb.send(t, tb.client, conv, "three")
	if p := tb.parentOf(t, conv, three.UserMessageId); p != two.AssistantMessageId {
		t.Errorf("an unchecked send hangs below %s; want %s", p, two.AssistantMessageId)
	}
	tb.writeReply(t, three.PromptId, "re: three")

	// An A/B comparison ends the path: either of its replies names the leaf.
	ab, err := tb.client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{
		ConversationId: conv, Text: "compare", ParentMessageId: three.AssistantMessageId,
		Model: &convov1.ModelConfig{Model: "a"}, CompareModel: &convov1.ModelConfig{Model: "b"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	tb.writeReply(t, ab.Msg.PromptId, "re: a")
	tb.writeReply(t, ab.Msg.ComparePromptId, "re: b")
	afterB, err := tb.sendBelow(conv, ab.Msg.CompareAssistantMessageId, "after b")
	if err != nil {
		t.Fatalf("send naming slot b of the comparison that ends the path: %v", err)
	}
	if p := tb.parentOf(t, conv, afterB.UserMessageId); p != ab.Msg.AssistantMessageId {
		t.Errorf("a message after a comparison hangs below %s; want slot a, %s", p, ab.Msg.AssistantMessageId)
	}
	// Slot b of a comparison no longer at the end is stale like any other.
	_, err = tb.sendBelow(conv, ab.Msg.CompareAssistantMessageId, "late")
	requireCode(t, err, connect.CodeFailedPrecondition)
}

// TestSendMessageParentRefusals: a malformed parentMessageId, or one
// without a conversation, is invalid_argument naming it; a conversation
// without messages has no leaf to name.
func TestSendMessageParentRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	one := tb.send(t, tb.client, "", "one")
	empty, err := tb.client.CreateConversation(ctx, connect.NewRequest(&convov1.CreateConversationRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, conv, parent string
		code               connect.Code
		says               string
	}{
		{"malformed", one.ConversationId, "x", connect.CodeInvalidArgument, "parentMessageId"},
		{"without a conversation", "", one.AssistantMessageId, connect.CodeInvalidArgument, "parentMessageId"},
		{"of another conversation", empty.Msg.Conversation.Id, one.AssistantMessageId, connect.CodeFailedPrecondition, "the active leaf is now none"},
	} {
		before := tb.countRows(t)
		_, err := tb.sendBelow(c.conv, c.parent, "hello")
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != c.code || !strings.Contains(ce.Message(), c.says) {
			t.Errorf("%s: %v; want %v saying %q", c.name, err, c.code, c.says)
		}
		if after := tb.countRows(t); after != before {
			t.Errorf("%s changed something: %s → %s", c.name, before, after)
		}
	}
}

// TestSendMessageParentConcurrent: tabs that all show the same leaf send
// at once; the check is made under the conversation's lock, in the
// transaction of the insert, so exactly one lands and every other is
// refused (a check read apart from the insert would let several in).
func TestSendMessageParentConcurrent(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	one := tb.send(t, tb.client, "", "one")
	const tabs = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, refused := 0, 0
	start := make(chan struct{})
	for range tabs {
		wg.Go(func() {
			<-start
			_, err := tb.sendBelow(one.ConversationId, one.AssistantMessageId, "me first")
			mu.Lock()
			defer mu.Unlock()
			switch connect.CodeOf(err) {
			case connect.CodeFailedPrecondition:
				refused++
			default:
				if err != nil {
					t.Errorf("send: %v", err)
					return
				}
				accepted++
			}
		})
	}
	close(start)
	wg.Wait()
	if accepted != 1 || refused != tabs-1 {
		t.Errorf("%d sends below one leaf: %d accepted, %d refused; want 1 and %d", tabs, accepted, refused, tabs-1)
	}
	if n := len(tb.state(t, one.ConversationId).Messages); n != 4 {
		t.Errorf("the conversation has %d messages; want 4", n)
	}
}
