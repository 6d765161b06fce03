package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// TestDemoReplyThroughStream is the product end to end: a message sent over
// Connect is answered by the in-process demo worker, and a subscriber sees
// every block type, then promptCompleted. It subscribes after the send, so
// the blocks (and the tool call) that ended before it joined are in its
// snapshot rather than streamed: it counts both, as a client shows both.
func TestDemoReplyThroughStream(t *testing.T) {
	t.Parallel()
	m := startMain(t, map[string]string{"CONVO_DEMO_TOKENS_PER_SECOND": "2000"})
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	sent, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "What is 6 times 7?"}))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: sent.Msg.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	blockTypes := map[string]bool{}
	toolCompleted := false
	for stream.Receive() {
		if snap := stream.Msg().GetSnapshot(); snap != nil {
			for _, msg := range snap.Messages {
				for _, b := range msg.Blocks {
					blockTypes[b.BlockType] = true
					if b.GetToolCall().GetStatus() == "completed" {
						toolCompleted = true
					}
				}
			}
			continue
		}
		e := stream.Msg().GetEvent()
		if bs := e.GetBlockStart(); bs != nil {
			blockTypes[bs.BlockType] = true
		}
		if e.GetToolCallCompleted() != nil {
			toolCompleted = true
		}
		if pf := e.GetPromptFailed(); pf != nil {
			t.Fatalf("prompt failed: %s", pf.Error)
		}
		if e.GetPromptCompleted() != nil {
			break
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"reasoning", "tool_use", "tool_result", "text"} {
		if !blockTypes[want] {
			t.Errorf("no %s block in the snapshot or streamed; saw %v", want, blockTypes)
		}
	}
	if !toolCompleted {
		t.Error("no tool call completed")
	}
	got, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.Msg.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	if reply := got.Msg.Messages[1]; reply.Status != "completed" || len(reply.Blocks) < 4 {
		t.Errorf("reply = %v", reply)
	}
}
