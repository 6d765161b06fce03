package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/testwait"
)

// TestEmbeddedPostgresKilled kills the embedded postmaster (kill -9, as
// the OOM killer or an operator would) under a running server: the server
// starts it again, /healthz answers 200 within 10 s of the kill, a message
// sent before is still there, and a new message is answered by the
// in-process workers and streamed to a subscriber, without restarting
// the server.
func TestEmbeddedPostgresKilled(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(tempDirFor(t, "postgres"), "pgdata")
	logs := &syncBuffer{}
	m := NewMain()
	m.Stdout = io.Discard
	m.Logger = slog.New(slog.NewTextHandler(logs, nil))
	env := map[string]string{"CONVO_HTTP_ADDR": "127.0.0.1:0", "CONVO_DATA_DIR": dataDir, "CONVO_EMBED_PORT": "0",
		"CONVO_WORKERS": "2", "CONVO_DEMO_TOKENS_PER_SECOND": "2000", "CONVO_DRAIN_TIMEOUT": "1s"}
	if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())

	// replyEnds waits for the reply to promptID to complete.
	replyEnds := func(conversationID, promptID string) {
		t.Helper()
		testwait.Until(t, ctx, "the reply to complete", func() bool {
			got, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: conversationID}))
			if err != nil {
				return false
			}
			for _, msg := range got.Msg.Messages {
				if msg.PromptId == promptID && msg.Role == "assistant" {
					return msg.Status == "completed"
				}
			}
			return false
		})
	}
	before, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "What is 6 times 7?"}))
	if err != nil {
		t.Fatal(err)
	}
	replyEnds(before.Msg.ConversationId, before.Msg.PromptId)

	// Only the postmaster of this test's own data directory is killed.
	pid := postmasterPID(t, dataDir)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	healthy := func() bool {
		resp, err := http.Get(m.URL() + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		// The old backends answer for a moment after the kill: healthy
		// means served by a new postmaster.
		b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
		if err != nil {
			return false
		}
		now, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
		return err == nil && now != pid && resp.StatusCode == http.StatusOK
	}
	healthCtx, cancelHealth := context.WithTimeout(ctx, 10*time.Second)
	defer cancelHealth()
	testwait.Until(t, healthCtx, "/healthz to answer 200 again within 10 s of the kill", healthy)
	t.Logf("healthy again %v after the kill", time.Since(killed).Round(time.Millisecond))

	// The message sent before the kill is still there.
	got, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: before.Msg.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Msg.Messages) != 2 || got.Msg.Messages[0].Id != before.Msg.UserMessageId || got.Msg.Messages[1].Status != "completed" {
		t.Fatalf("conversation after the kill: %v", got.Msg.Messages)
	}

	// A subscriber sees a new reply stream in: the workers and the stream
	// hub's LISTEN connection are back too.
	stream, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: before.Msg.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetSnapshot() == nil {
		t.Fatalf("no snapshot first: %v", stream.Err())
	}
	after, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: before.Msg.ConversationId, Text: "What is 7 times 8?"}))
	if err != nil {
		t.Fatalf("SendMessage after the kill: %v", err)
	}
	completed := false
	for !completed && stream.Receive() {
		e := stream.Msg().GetEvent()
		if pf := e.GetPromptFailed(); pf != nil {
			t.Fatalf("prompt failed after the kill: %s", pf.Error)
		}
		completed = e.GetPromptCompleted().GetPrompt().GetId() == after.Msg.PromptId
	}
	if !completed {
		t.Fatalf("stream ended before the reply sent after the kill completed: %v", stream.Err())
	}

	for _, want := range []string{`msg="embedded PostgreSQL exited"`, `msg="restarting embedded PostgreSQL" attempt=1`, `msg="embedded PostgreSQL is back"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no %s in the log:\n%s", want, logs)
		}
	}
}
