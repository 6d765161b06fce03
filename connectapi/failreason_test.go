package connectapi_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// failReply plays a worker whose reply fails with cause.
func (tb *testBundle) failReply(t testing.TB, promptID, cause string) {
	t.Helper()
	ctx := context.Background()
	id := uuid.MustParse(promptID)
	if err := tb.api.PromptStart(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := tb.api.PromptFail(ctx, apiq.PromptFailParams{PromptID: id, Error: cause}); err != nil {
		t.Fatal(err)
	}
}

// errorsByID maps each message's id to its error.
func errorsByID(messages []*convov1.Message) map[string]string {
	out := make(map[string]string, len(messages))
	for _, m := range messages {
		out[m.Id] = m.Error
	}
	return out
}

// TestFailedReplySaysWhy: a failed reply's message carries its prompt's
// error wherever a message is read (the live messageUpdated, a later
// stream's snapshot, GetConversation, a ListMessages page), and the
// error counts in the snapshot's byte budget: a 3,500-byte cause leaves
// the failed exchange out of a 4,096-byte snapshot, to its older page.
// A completed reply has none.
func TestFailedReplySaysWhy(t *testing.T) {
	t.Parallel()
	forEachFeed(t, func(t *testing.T, feed string) {
		ctx := context.Background()
		tb := setup(t, setupOptions{feed: feed, snapshotBytes: 4096})
		cause := "getaddrinfo ENOTFOUND api.openai.com " + strings.Repeat("x", 3500)
		one := tb.send(t, tb.client, "", "one")
		conv := one.ConversationId
		live := subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: conv})
		defer live.close()
		tb.failReply(t, one.PromptId, cause)
		two := tb.send(t, tb.client, conv, "two")
		tb.writeReply(t, two.PromptId, "re: two")
		seq := tb.mark(t, conv)

		folded := live.waitSeq(t, seq, streamTimeout)
		if got := folded.message(one.AssistantMessageId).GetError(); got != cause {
			t.Errorf("live: the failed reply's error is %.40q; want %.40q", got, cause)
		}
		// GetConversation's window holds the newest exchange (the
		// failed one's error does not fit in it); its older pages are
		// ListMessages'.
		get, err := tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: conv}))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(get.Msg.Messages); n != 2 {
			t.Errorf("GetConversation holds %d messages in 4096 bytes; want the newest 2", n)
		}
		errs := errorsByID(tb.state(t, conv).Messages)
		if errs[one.AssistantMessageId] != cause {
			t.Errorf("GetConversation: the failed reply's error is %.40q; want %.40q", errs[one.AssistantMessageId], cause)
		}
		for _, id := range []string{one.UserMessageId, two.UserMessageId, two.AssistantMessageId} {
			if e, ok := errs[id]; !ok || e != "" {
				t.Errorf("GetConversation: message %s: error %q (present %v); want empty", id, e, ok)
			}
		}

		st, err := tb.client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: conv}))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if !st.Receive() {
			t.Fatal(st.Err())
		}
		snap := st.Msg().GetSnapshot()
		if snap == nil {
			t.Fatalf("first message %v; want a snapshot", st.Msg())
		}
		if _, ok := errorsByID(snap.Messages)[one.AssistantMessageId]; ok || snap.OlderPageToken == "" {
			t.Fatalf("the snapshot holds %d messages (older token %q) with the failed reply in; its error should have left it out of 4096 bytes",
				len(snap.Messages), snap.OlderPageToken)
		}
		page, err := tb.client.ListMessages(ctx, connect.NewRequest(&convov1.ListMessagesRequest{ConversationId: conv, PageToken: snap.OlderPageToken}))
		if err != nil {
			t.Fatal(err)
		}
		if got := errorsByID(page.Msg.Messages)[one.AssistantMessageId]; got != cause {
			t.Errorf("ListMessages: the failed reply's error is %.40q; want %.40q", got, cause)
		}

		// A snapshot that holds it has it.
		short := tb.send(t, tb.client, "", "three")
		tb.failReply(t, short.PromptId, "the model is down")
		st2, err := tb.client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: short.ConversationId}))
		if err != nil {
			t.Fatal(err)
		}
		defer st2.Close()
		if !st2.Receive() {
			t.Fatal(st2.Err())
		}
		snapMsgs := st2.Msg().GetSnapshot().GetMessages()
		if got := errorsByID(snapMsgs)[short.AssistantMessageId]; got != "the model is down" {
			t.Errorf("snapshot: the failed reply's error is %q; want %q", got, "the model is down")
		}
	})
}

// TestSwitchToFailedReplySaysWhy: a branchSwitched to a failed version of
// a reply carries that version's error in its messages.
func TestSwitchToFailedReplySaysWhy(t *testing.T) {
	t.Parallel()
	forEachFeed(t, func(t *testing.T, feed string) {
		ctx := context.Background()
		tb := setup(t, setupOptions{feed: feed})
		one := tb.send(t, tb.client, "", "one")
		conv := one.ConversationId
		tb.failReply(t, one.PromptId, "rate limited")
		re, err := tb.client.RegenerateReply(ctx, connect.NewRequest(&convov1.RegenerateReplyRequest{ConversationId: conv}))
		if err != nil {
			t.Fatal(err)
		}
		tb.writeReply(t, re.Msg.PromptId, "re: one")
		live := subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: conv, IncludeBranches: true})
		defer live.close()
		if _, err := tb.client.SwitchBranch(ctx, connect.NewRequest(&convov1.SwitchBranchRequest{
			ConversationId: conv, MessageId: one.AssistantMessageId,
		})); err != nil {
			t.Fatal(err)
		}
		live.waitSeq(t, tb.mark(t, conv), streamTimeout)
		live.mu.Lock()
		defer live.mu.Unlock()
		var switched *convov1.BranchSwitched
		for _, r := range live.received {
			if b := r.GetEvent().GetBranchSwitched(); b != nil {
				switched = b
			}
		}
		if switched == nil {
			t.Fatal("no branchSwitched received")
		}
		errs := errorsByID(switched.Messages)
		if e, ok := errs[one.AssistantMessageId]; e != "rate limited" {
			t.Errorf("branchSwitched: the failed reply's error is %q (present %v); want %q", e, ok, "rate limited")
		}
	})
}
