package connectapi_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/internal/jsonlimit"
	"github.com/convo-dev/convo/internal/pgtest"
)

// poisonedConversation writes a conversation as a database written before
// convo's rule for JSON may hold it: a first reply, a reply whose stored
// JSON breaks the rule (pgtest.WritePoisonedReply: 1e400 in a block's
// metadata and in a tool call's input, metadata nested 12,000 deep), and a
// last reply. It returns the conversation's id.
func poisonedConversation(t testing.TB, tb *testBundle) string {
	t.Helper()
	ctx := context.Background()
	first := tb.send(t, tb.client, "", "before")
	tb.writeReply(t, first.PromptId, "the first reply")
	poisoned := tb.send(t, tb.client, first.ConversationId, "poison")
	if _, err := pgtest.WritePoisonedReply(ctx, tb.pool, poisoned.PromptId); err != nil {
		t.Fatal(err)
	}
	last := tb.send(t, tb.client, first.ConversationId, "after")
	tb.writeReply(t, last.PromptId, "the last reply")
	return first.ConversationId
}

// requirePoisonShown fails unless what (a response, as proto3 JSON) shows
// every message of poisonedConversation, the poisoned values as the
// readers' placeholders (but "the last reply" when last is false).
func requirePoisonShown(t testing.TB, what string, m proto.Message, last bool) {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	wants := []string{"the first reply", pgtest.PoisonedText, pgtest.PoisonedDeep, jsonlimit.PlaceholderNumber, jsonlimit.PlaceholderDeep}
	if last {
		wants = append(wants, "the last reply")
	}
	for _, want := range wants {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s does not show %q", what, want)
		}
	}
}

// TestReadersShowPoisonedValues: a conversation holding values that
// protojson cannot decode (written before the rule) reads through
// GetConversation and StreamConversation (its snapshot, and a live event
// carrying such a value), every message there, the values as the marked
// placeholders.
func TestReadersShowPoisonedValues(t *testing.T) {
	t.Parallel()
	forEachFeed(t, func(t *testing.T, feed string) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		tb := setup(t, setupOptions{feed: feed})
		id := poisonedConversation(t, tb)

		got, err := tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: id, IncludePauseEvents: true}))
		if err != nil {
			t.Fatalf("GetConversation: %v", err)
		}
		requirePoisonShown(t, "GetConversation", got.Msg, true)

		st, err := tb.client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: id}))
		if err != nil {
			t.Fatal(err)
		}
		if !st.Receive() || st.Msg().GetSnapshot() == nil {
			t.Fatalf("no snapshot: %v", st.Err())
		}
		requirePoisonShown(t, "the snapshot", st.Msg().GetSnapshot(), true)

		// Live: a reply starts a tool call whose input is poisoned.
		live := tb.send(t, tb.client, id, "live")
		if err := tb.api.PromptStart(ctx, uuid.MustParse(live.PromptId)); err != nil {
			t.Fatal(err)
		}
		if _, err := pgtest.StartPoisonedToolCall(ctx, tb.pool, live.PromptId); err != nil {
			t.Fatal(err)
		}
		if err := tb.api.PromptComplete(ctx, uuid.MustParse(live.PromptId)); err != nil {
			t.Fatal(err)
		}
		var started *convov1.ToolCallStarted
		for {
			if !st.Receive() {
				t.Fatalf("the stream ended: %v", st.Err())
			}
			ev := st.Msg().GetEvent()
			if s := ev.GetToolCallStarted(); s != nil {
				started = s
			}
			if ev.GetPromptCompleted() != nil {
				break
			}
		}
		if started == nil {
			t.Fatal("no toolCallStarted before promptCompleted")
		}
		if v := started.GetInput().GetStructValue().GetFields()["expression"].GetStringValue(); v != jsonlimit.PlaceholderNumber {
			t.Errorf("the live toolCallStarted's input.expression = %q, want %q", v, jsonlimit.PlaceholderNumber)
		}
	})
}

// TestListMessagesShowsPoisonedValues: the pages of older messages read
// too (the snapshot's budget leaves the poisoned reply, and the replies
// before it, out of it).
func TestListMessagesShowsPoisonedValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t, setupOptions{snapshotBytes: 4096})
	id := poisonedConversation(t, tb)
	for i := range 3 {
		tb.writeReply(t, tb.send(t, tb.client, id, "more").PromptId, strings.Repeat("filler ", 100+i))
	}
	sctx, cancel := context.WithCancel(ctx)
	st, err := tb.client.StreamConversation(sctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() || st.Msg().GetSnapshot() == nil {
		t.Fatalf("no snapshot: %v", st.Err())
	}
	token := st.Msg().GetSnapshot().GetOlderPageToken()
	cancel()
	if token == "" {
		t.Fatal("the snapshot holds every message: no page to list")
	}
	all := &convov1.ListMessagesResponse{}
	for pages := 0; token != ""; pages++ {
		if pages > 20 {
			t.Fatal("more than 20 pages")
		}
		res, err := tb.client.ListMessages(ctx, connect.NewRequest(&convov1.ListMessagesRequest{ConversationId: id, PageToken: token}))
		if err != nil {
			t.Fatalf("ListMessages: %v", err)
		}
		all.Messages = append(all.Messages, res.Msg.Messages...)
		token = res.Msg.NextPageToken
	}
	requirePoisonShown(t, "ListMessages", all, false)
}
