package connectapi_test

import (
	"context"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/internal/pgtest"
)

// TestSnapshotPagesEqualGetConversation: a bounded snapshot, then
// ListMessages from its older_page_token until no token is left, gives
// every message of GetConversation exactly once, in order, each as
// GetConversation has it (the streaming reply's completed blocks in the
// snapshot, its text so far in the replay).
func TestSnapshotPagesEqualGetConversation(t *testing.T) {
	forEachFeed(t, func(t *testing.T, feed string) {
		ctx := context.Background()
		tb := setup(t, setupOptions{feed: feed, snapshotBytes: 8192})
		id, err := pgtest.FillConversation(ctx, tb.pool.Config().ConnString(), "local", 20, 3000)
		if err != nil {
			t.Fatal(err)
		}
		// A reply streaming at the end.
		sent := tb.send(t, tb.client, id.String(), "and now?")
		prompt := uuid.MustParse(sent.PromptId)
		if err := tb.api.PromptStart(ctx, prompt); err != nil {
			t.Fatal(err)
		}
		tb.appendText(t, tb.startBlock(t, prompt, "text"), "so far")

		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := tb.client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: id.String()}))
		if err != nil {
			t.Fatal(err)
		}
		if !st.Receive() {
			t.Fatal(st.Err())
		}
		snap := st.Msg().GetSnapshot()
		if snap == nil || snap.OlderPageToken == "" {
			t.Fatalf("first message: %v; want a snapshot with an older_page_token", st.Msg())
		}
		// 8192 bytes hold the newest two exchanges (3 KB replies) and the
		// streaming one.
		if n := len(snap.Messages); n < 3 || n > 8 {
			t.Fatalf("the snapshot holds %d of 42 messages, want a few", n)
		}
		got := snap.Messages
		for token, pages := snap.OlderPageToken, 0; token != ""; pages++ {
			if pages > 42 {
				t.Fatal("paging does not end")
			}
			res, err := tb.client.ListMessages(ctx, connect.NewRequest(&convov1.ListMessagesRequest{ConversationId: id.String(), PageToken: token}))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Msg.Messages) == 0 {
				t.Fatal("an empty page with a token before it")
			}
			got = append(slices.Clone(res.Msg.Messages), got...)
			token = res.Msg.NextPageToken
		}
		want := tb.state(t, id.String()).Messages
		if len(got) != len(want) {
			t.Fatalf("snapshot and pages hold %d messages, GetConversation %d", len(got), len(want))
		}
		for i, m := range got {
			w := want[i]
			if m.Id != w.Id {
				t.Fatalf("message %d: %s, want %s", i, m.Id, w.Id)
			}
			if m.Id == sent.AssistantMessageId {
				continue // its streaming block is in the replay, not the snapshot
			}
			if len(m.Blocks) != len(w.Blocks) || (len(m.Blocks) > 0 && m.Blocks[0].Content != w.Blocks[0].Content) {
				t.Fatalf("message %d: blocks differ from GetConversation's", i)
			}
		}
	})
}
