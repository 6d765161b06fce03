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
	"github.com/convo-dev/convo/internal/testbin"
	"github.com/convo-dev/convo/internal/testwait"
)

// TestPauseSurvivesServerKill kills a server with SIGKILL (no drain)
// while its worker's reply waits for an approval. The waiting prompt
// holds no worker, so another server on the same database takes it once
// the approval is answered through that server: the reply goes on in the
// same assistant message, written by the other server's worker, and a
// stream that joined after the kill folds to what GetConversation shows.
func TestPauseSurvivesServerKill(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t, apiPkg)
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	common := []string{"DATABASE_URL=" + dsn, "CONVO_DEMO_TOKENS_PER_SECOND=1000", "CONVO_LOG_LEVEL=info"}
	a := startProcess(t, bin, append(common, "CONVO_WORKER_NAME=server-a")...)
	clientA := convov1connect.NewConversationServiceClient(http.DefaultClient, a.url)
	sent, err := clientA.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "/approve this note"}))
	if err != nil {
		t.Fatal(err)
	}
	conversation := func(client convov1connect.ConversationServiceClient) *convov1.GetConversationResponse {
		t.Helper()
		res, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.Msg.ConversationId, IncludePauseEvents: true}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg
	}
	testwait.Until(t, ctx, "the reply to wait for the approval", func() bool {
		return queryString(t, ctx, dsn, `SELECT waiting::text FROM convo.prompts WHERE id = $1`, sent.Msg.PromptId) == "true"
	})
	before := conversation(clientA)
	if len(before.PendingInputs) != 1 || before.PendingInputs[0].Kind != "approval" || before.PendingInputs[0].Status != "pending" {
		t.Fatalf("pending inputs while waiting = %v; want one pending approval", before.PendingInputs)
	}
	request := before.PendingInputs[0]
	if len(before.Messages) != 2 || before.Messages[1].Role != "assistant" {
		t.Fatalf("messages while waiting = %v; want the user's and the assistant's", before.Messages)
	}
	replyID := before.Messages[1].Id

	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.cmd.Wait() //nolint:errcheck // killed: the error is the signal
	if w := promptWorker(t, ctx, dsn, sent.Msg.PromptId); w != "" {
		t.Fatalf("the waiting prompt is held by %q; want no worker", w)
	}

	b := startProcess(t, bin, append(common, "CONVO_WORKER_NAME=server-b")...)
	clientB := convov1connect.NewConversationServiceClient(http.DefaultClient, b.url)
	// B shows the request A's worker made, still pending.
	if got := conversation(clientB); len(got.PendingInputs) != 1 || got.PendingInputs[0].ToolCallId != request.ToolCallId || got.PendingInputs[0].Status != "pending" {
		t.Fatalf("B's pending inputs = %v; want A's request, pending", got.PendingInputs)
	}
	f := &follower{conversationID: sent.Msg.ConversationId, blocks: map[string]string{}, servers: []string{b.url}, pauses: true}
	connected := make(chan struct{})
	followed := make(chan error, 1)
	go func() { followed <- f.run(ctx, t, sent.Msg.PromptId, connected) }()
	select {
	case <-connected:
	case err := <-followed:
		t.Fatalf("the follower stopped before streaming: %v", err)
	}

	approve := &convov1.InputAnswer{Kind: &convov1.InputAnswer_Approval{Approval: &convov1.ApprovalAnswer{Approved: true}}}
	answered, err := clientB.AnswerInput(ctx, connect.NewRequest(&convov1.AnswerInputRequest{ToolCallId: request.ToolCallId, Answer: approve}))
	if err != nil {
		t.Fatal(err)
	}
	if answered.Msg.InputRequest.Status != "answered" {
		t.Errorf("answered request = %v", answered.Msg.InputRequest)
	}
	_, err = clientB.AnswerInput(ctx, connect.NewRequest(&convov1.AnswerInputRequest{ToolCallId: request.ToolCallId, Answer: approve}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("a second answer: %v; want FailedPrecondition", err)
	}

	select {
	case err := <-followed:
		if err != nil {
			t.Fatalf("follower: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("the reply did not complete: prompt %s", promptStatus(t, ctx, dsn, sent.Msg.PromptId))
	}
	if s := promptStatus(t, ctx, dsn, sent.Msg.PromptId); s != "completed" {
		t.Errorf("prompt status = %q, want completed", s)
	}
	if w := promptWorker(t, ctx, dsn, sent.Msg.PromptId); w != "server-b" {
		t.Errorf("the resumed prompt was run by %q, want B's worker", w)
	}

	got := conversation(clientB)
	if len(got.Messages) != 2 || got.Messages[1].Id != replyID {
		t.Fatalf("messages after the answer = %v; want the same assistant message %s", got.Messages, replyID)
	}
	reply := got.Messages[1]
	if reply.Status != "completed" {
		t.Errorf("reply status = %q, want completed", reply.Status)
	}
	if len(got.PendingInputs) != 0 {
		t.Errorf("pending inputs after the reply = %v", got.PendingInputs)
	}
	var text strings.Builder
	var call *convov1.ToolCall
	for _, blk := range reply.Blocks {
		text.WriteString(blk.Content)
		if blk.ToolCall != nil && blk.ToolCall.Id == request.ToolCallId {
			call = blk.ToolCall
		}
		if f.blocks[blk.Id] != blk.Content {
			t.Errorf("block %s (%s): the stream on B folds to %q, GetConversation has %q", blk.Id, blk.BlockType, f.blocks[blk.Id], blk.Content)
		}
	}
	if len(f.blocks) != len(reply.Blocks)+len(got.Messages[0].Blocks) {
		t.Errorf("the stream on B folded %d blocks, GetConversation has %d", len(f.blocks), len(reply.Blocks)+len(got.Messages[0].Blocks))
	}
	if !strings.Contains(text.String(), "published a note") {
		t.Errorf("the reply does not say it published a note:\n%s", text.String())
	}
	if call == nil || call.Name != "publish_note" || call.Status != "completed" {
		t.Errorf("tool call %s = %v; want publish_note completed", request.ToolCallId, call)
	}
	b.stop(t)
}
