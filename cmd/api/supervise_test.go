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
// the OOM killer would) under a running server, mid-reply: the server
// starts it again, /healthz answers 200 within 10 s of the kill, what was
// written before is still there, the reply in flight completes with the
// text it has without a fault, and a new message is answered by the
// in-process workers and streamed to a subscriber, all without restarting
// the server. With either feed.
func TestEmbeddedPostgresKilled(t *testing.T) {
	t.Parallel()
	for name, feed := range feedNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testPostgresKilled(t, feed)
		})
	}
}

func testPostgresKilled(t *testing.T, feed string) {
	dataDir := filepath.Join(tempDirFor(t, "postgres"), "pgdata")
	logs := &syncBuffer{}
	m := NewMain()
	m.Stdout = io.Discard
	m.Logger = slog.New(slog.NewTextHandler(logs, nil))
	env := map[string]string{"CONVO_HTTP_ADDR": "127.0.0.1:0", "CONVO_DATA_DIR": dataDir, "CONVO_EMBED_PORT": "0",
		"CONVO_WORKERS": "2", "CONVO_DEMO_TOKENS_PER_SECOND": "200", "CONVO_DRAIN_TIMEOUT": "1s", "CONVO_FEED": feed}
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

	// reply returns the assistant message of a SendMessage, once cond
	// holds for it.
	reply := func(sent *convov1.SendMessageResponse, what string, cond func(*convov1.Message) bool) *convov1.Message {
		t.Helper()
		var found *convov1.Message
		testwait.Until(t, ctx, what, func() bool {
			got, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.ConversationId}))
			if err != nil {
				return false
			}
			for _, msg := range got.Msg.Messages {
				if msg.Id == sent.AssistantMessageId && cond(msg) {
					found = msg
					return true
				}
			}
			return false
		})
		return found
	}
	completed := func(msg *convov1.Message) bool { return msg.Status == "completed" }
	text := func(msg *convov1.Message) string {
		var b strings.Builder
		for _, block := range msg.Blocks {
			b.WriteString(block.BlockType + ": " + block.Content + "\n")
		}
		return b.String()
	}
	send := func(conversationID, text string) *convov1.SendMessageResponse {
		t.Helper()
		res, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: conversationID, Text: text}))
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		return res.Msg
	}

	// The demo model answers a message the same way every time.
	before := send("", "What is 6 times 7?")
	want := text(reply(before, "the reply before the kill to complete", completed))
	inFlight := send("", "What is 6 times 7?")
	reply(inFlight, "the second reply to stream", func(msg *convov1.Message) bool {
		return msg.Status == "processing" && len(msg.Blocks) > 0
	})

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

	// What was written before the kill is still there, and the reply in
	// flight went on: no character lost or doubled.
	if got := text(reply(before, "the reply before the kill", completed)); got != want {
		t.Errorf("reply written before the kill changed:\n got %q\nwant %q", got, want)
	}
	if got := text(reply(inFlight, "the reply in flight at the kill to complete", completed)); got != want {
		t.Errorf("reply in flight at the kill:\n got %q\nwant %q", got, want)
	}

	// A subscriber sees a new reply stream in: the workers and the stream
	// hub's LISTEN connection are back too.
	stream, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: before.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetSnapshot() == nil {
		t.Fatalf("no snapshot first: %v", stream.Err())
	}
	after := send(before.ConversationId, "What is 7 times 8?")
	done := false
	for !done && stream.Receive() {
		e := stream.Msg().GetEvent()
		if pf := e.GetPromptFailed(); pf != nil {
			t.Fatalf("prompt failed after the kill: %s", pf.Error)
		}
		done = e.GetPromptCompleted().GetPrompt().GetId() == after.PromptId
	}
	if !done {
		t.Fatalf("stream ended before the reply sent after the kill completed: %v", stream.Err())
	}

	for _, want := range []string{
		`level=ERROR msg="embedded PostgreSQL exited" pid=` + strconv.Itoa(pid) + ` status="signal: killed"`,
		`level=WARN msg="restarting embedded PostgreSQL" attempt=1 backoff=100ms`,
		`level=INFO msg="embedded PostgreSQL is back"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no %s in the log:\n%s", want, logs)
		}
	}
}
