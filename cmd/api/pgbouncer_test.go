package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testwait"
)

// TestThroughPgBouncer runs the production wiring with its pools and its
// in-process workers' pool through a real PgBouncer in transaction mode
// (CONVO_DB_POOL_MODE=transaction, a few server connections for all of
// them) and its listener and migrations on the direct URL
// (CONVO_DIRECT_DATABASE_URL): a send, a stream that sees the demo
// worker's reply pause for an approval and, once answered, complete, the
// stream's text equal to what GetConversation reads; a stream resumed
// after a seq that misses and repeats nothing; an edit (a path change,
// with its snapshot bound set in its transaction) answered too.
func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pooled := pgtest.PgBouncer(t, dsn)[0]
	m := startMain(t, map[string]string{
		"DATABASE_URL": pooled, "CONVO_DB_POOL_MODE": "transaction", "CONVO_DIRECT_DATABASE_URL": dsn,
		"CONVO_DEMO_TOKENS_PER_SECOND": "1000", "CONVO_SNAPSHOT_BYTES": "65536", "CONVO_WORKERS": "2",
	})
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// A reply that pauses for an approval, followed from the start.
	sent, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "/approve this note"}))
	if err != nil {
		t.Fatal(err)
	}
	conv := sent.Msg.ConversationId
	f := &follower{conversationID: conv, blocks: map[string]string{}, servers: []string{m.URL()}, pauses: true}
	connected := make(chan struct{})
	followed := make(chan error, 1)
	go func() { followed <- f.run(ctx, t, sent.Msg.PromptId, connected) }()
	select {
	case <-connected:
	case err := <-followed:
		t.Fatalf("the stream stopped before it began: %v", err)
	}
	read := func() *convov1.GetConversationResponse {
		t.Helper()
		res, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: conv, IncludePauseEvents: true}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg
	}
	var request *convov1.InputRequest
	testwait.Until(t, ctx, "the reply to ask for an approval", func() bool {
		if p := read().PendingInputs; len(p) == 1 && p[0].Status == "pending" {
			request = p[0]
			return true
		}
		return false
	})
	approve := &convov1.InputAnswer{Kind: &convov1.InputAnswer_Approval{Approval: &convov1.ApprovalAnswer{Approved: true}}}
	if _, err := client.AnswerInput(ctx, connect.NewRequest(&convov1.AnswerInputRequest{ToolCallId: request.ToolCallId, Answer: approve})); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-followed:
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("the paused reply did not complete after its approval: prompt %s", promptStatus(t, ctx, dsn, sent.Msg.PromptId))
	}
	got := read()
	if len(got.Messages) != 2 || got.Messages[1].Status != "completed" || len(got.PendingInputs) != 0 {
		t.Fatalf("after the approval: messages %v, pending %v; want the completed reply, nothing pending", got.Messages, got.PendingInputs)
	}
	for _, b := range got.Messages[1].Blocks {
		if f.blocks[b.Id] != b.Content {
			t.Errorf("block %s (%s): the stream folds to %q, GetConversation reads %q", b.Id, b.BlockType, f.blocks[b.Id], b.Content)
		}
	}

	// A second reply, its stream cut after a few events and resumed
	// after the last seq it applied: follower.apply fails the test on a
	// missed or repeated seq.
	second, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: conv, Text: "What is 6 times 7?"}))
	if err != nil {
		t.Fatal(err)
	}
	first := &follower{conversationID: conv, blocks: map[string]string{}}
	cut, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: conv}))
	if err != nil {
		t.Fatal(err)
	}
	done := false
	for n := 0; n < 5 && !done && cut.Receive(); n++ {
		done = first.apply(t, cut.Msg(), second.Msg.PromptId)
	}
	cut.Close()
	if !done {
		resumed := &follower{conversationID: conv, blocks: first.blocks, seq: first.seq}
		stream, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: conv, AfterSeq: &resumed.seq}))
		if err != nil {
			t.Fatal(err)
		}
		for !done && stream.Receive() {
			if stream.Msg().GetSnapshot() != nil {
				t.Fatal("the resumed stream began with a snapshot; want the events after its seq")
			}
			done = resumed.apply(t, stream.Msg(), second.Msg.PromptId)
		}
		stream.Close()
		if !done {
			t.Fatalf("the resumed stream ended before the reply completed: %v", stream.Err())
		}
		first = resumed
	}
	got = read()
	last := got.Messages[len(got.Messages)-1]
	if last.Status != "completed" || !strings.Contains(strings.Join(blockTexts(last), ""), "42") {
		t.Errorf("the second reply: %s %q; want completed, with 42", last.Status, blockTexts(last))
	}
	for _, b := range last.Blocks {
		if first.blocks[b.Id] != b.Content {
			t.Errorf("block %s: the resumed stream folds to %q, GetConversation reads %q", b.Id, first.blocks[b.Id], b.Content)
		}
	}

	// An edit changes the conversation's path in a transaction of its
	// own, which sets the snapshot bound first; its reply comes too.
	edited, err := client.EditMessage(ctx, connect.NewRequest(&convov1.EditMessageRequest{ConversationId: conv, MessageId: got.Messages[0].Id, Text: "/approve another note"}))
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, ctx, "the edit's reply to ask for an approval", func() bool {
		if p := read().PendingInputs; len(p) == 1 && p[0].Status == "pending" {
			request = p[0]
			return true
		}
		return false
	})
	if _, err := client.AnswerInput(ctx, connect.NewRequest(&convov1.AnswerInputRequest{ToolCallId: request.ToolCallId, Answer: approve})); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, ctx, "the edit's reply to complete", func() bool {
		return promptStatus(t, ctx, dsn, edited.Msg.PromptId) == "completed"
	})
	if got := read(); len(got.Messages) != 2 || got.Messages[0].Id != edited.Msg.UserMessageId || got.Messages[1].Status != "completed" {
		t.Errorf("after the edit: %v; want the edited message and its completed reply", got.Messages)
	}
}

// blockTexts is the content of each of m's blocks.
func blockTexts(m *convov1.Message) []string {
	var out []string
	for _, b := range m.Blocks {
		out = append(out, b.Content)
	}
	return out
}

// TestPoolModeSettings: CONVO_DB_POOL_MODE takes session or transaction,
// and transaction needs CONVO_DIRECT_DATABASE_URL and DATABASE_URL; each
// refusal names the setting.
func TestPoolModeSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want string // "" for none
	}{
		{map[string]string{"DATABASE_URL": "postgres://a/b", "CONVO_DB_POOL_MODE": "session"}, ""},
		{map[string]string{"DATABASE_URL": "postgres://a/b", "CONVO_DB_POOL_MODE": "transaction", "CONVO_DIRECT_DATABASE_URL": "postgres://c/b"}, ""},
		{map[string]string{"DATABASE_URL": "postgres://a/b", "CONVO_DB_POOL_MODE": "statement"}, `CONVO_DB_POOL_MODE (--db-pool-mode) is "statement"`},
		{map[string]string{"DATABASE_URL": "postgres://a/b", "CONVO_DB_POOL_MODE": "transaction"}, "needs CONVO_DIRECT_DATABASE_URL"},
		{map[string]string{"CONVO_DB_POOL_MODE": "transaction", "CONVO_DIRECT_DATABASE_URL": "postgres://c/b"}, "needs DATABASE_URL"},
	} {
		m := NewMain()
		err := m.ParseFlags(nil, func(k string) string { return c.env[k] })
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.env, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v; want an error saying %q", c.env, err, c.want)
		}
	}
}
