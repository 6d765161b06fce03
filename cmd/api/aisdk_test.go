package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testbin"
)

// uiChunks reads a UI message stream's chunks ("[DONE]" as {"type":
// "[DONE]"}) into a channel, closed when the body ends.
func uiChunks(body io.Reader) <-chan map[string]any {
	out := make(chan map[string]any, 10_000)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			chunk := map[string]any{"type": data}
			if data != "[DONE]" {
				chunk = map[string]any{}
				if json.Unmarshal([]byte(data), &chunk) != nil {
					chunk = map[string]any{"type": "unparsable: " + data}
				}
			}
			out <- chunk
		}
	}()
	return out
}

// TestAISDKResumeAfterServerKilled kills (SIGKILL) the server whose
// POST /v1/ai-sdk/chat is streaming a reply, while a second server on the
// same database keeps running, with the worker: the client's response
// drops, and the resume request (GET /v1/ai-sdk/chat/{id}/stream) to the
// second server gets the whole reply, from its first character to its
// end, exactly as the database holds it.
func TestAISDKResumeAfterServerKilled(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t, apiPkg)
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a := startProcess(t, bin, "DATABASE_URL="+dsn, "CONVO_WORKERS=0")
	b := startProcess(t, bin, "DATABASE_URL="+dsn, "CONVO_WORKERS=1", "CONVO_DEMO_TOKENS_PER_SECOND=150")

	chat := uuid.NewString()
	body := `{"id":"` + chat + `","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"Tell me about the weather"}]}]}`
	req, err := http.NewRequestWithContext(ctx, "POST", a.url+"/v1/ai-sdk/chat", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST to A: %s", resp.Status)
	}
	first := uiChunks(resp.Body)
	for c := range first {
		if c["type"] == "text-delta" {
			break // mid-reply
		}
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	for c := range first {
		if c["type"] == "[DONE]" || c["type"] == "finish" {
			t.Fatalf("A's response ended cleanly (%v) although A was killed mid-reply", c)
		}
	}

	resume, err := http.Get(b.url + "/v1/ai-sdk/chat/" + chat + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resume.Body.Close()
	if resume.StatusCode != http.StatusOK || resume.Header.Get("X-Vercel-AI-UI-Message-Stream") != "v1" {
		t.Fatalf("resume on B: %s (the reply may have finished before the resume: slow the demo model down)", resume.Status)
	}
	var chunks []map[string]any
	blocks := map[string]string{}
	for c := range uiChunks(resume.Body) {
		chunks = append(chunks, c)
		switch c["type"] {
		case "text-delta", "reasoning-delta":
			blocks[c["id"].(string)] += c["delta"].(string)
		}
	}
	if len(chunks) < 3 || chunks[0]["type"] != "start" || chunks[len(chunks)-1]["type"] != "[DONE]" ||
		chunks[len(chunks)-2]["type"] != "finish" || chunks[len(chunks)-2]["finishReason"] != "stop" {
		t.Fatalf("the resumed stream is not a whole reply: %v … %v", chunks[:min(3, len(chunks))], chunks[max(0, len(chunks)-3):])
	}

	client := convov1connect.NewConversationServiceClient(http.DefaultClient, b.url)
	got, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: chat}))
	if err != nil {
		t.Fatal(err)
	}
	reply := got.Msg.Messages[1]
	if reply.Status != "completed" || chunks[0]["messageId"] != reply.Id {
		t.Fatalf("the reply %s is %s; the stream started %v", reply.Id, reply.Status, chunks[0])
	}
	var texts int
	for _, blk := range reply.Blocks {
		if blk.BlockType != "text" && blk.BlockType != "reasoning" {
			continue
		}
		texts++
		if blocks[blk.Id] != blk.Content {
			t.Errorf("%s block %s: the resumed stream has %q, the database %q", blk.BlockType, blk.Id, blocks[blk.Id], blk.Content)
		}
	}
	if texts == 0 || len(blocks) != texts {
		t.Errorf("the resumed stream has %d text and reasoning parts, the reply %d", len(blocks), texts)
	}
	b.stop(t)
}
