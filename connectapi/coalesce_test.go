package connectapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/convo-dev/convo/connectapi"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// flushCounter counts the flushes that reach the connection.
type flushCounter struct {
	http.ResponseWriter
	n *atomic.Int32
}

func (w flushCounter) Flush() {
	w.n.Add(1)
	w.ResponseWriter.(http.Flusher).Flush()
}

// TestStreamCoalescesFlushes checks that StreamConversation writes every
// event that is ready before flushing once, instead of once per event
// (what connect-go does by itself), and that it still flushes each event
// at once when it is the only one ready.
func TestStreamCoalescesFlushes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sent := b.send(t, b.client, "", "coalesce")
	prompt := uuid.MustParse(sent.PromptId)
	if err := b.api.PromptStart(ctx, prompt); err != nil {
		t.Fatal(err)
	}
	block, err := b.api.BlockStart(ctx, apiq.BlockStartParams{PromptID: prompt, BlockType: "text", Metadata: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	const deltas = 50
	for range deltas {
		if err := b.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: block, Delta: "x"}); err != nil {
			t.Fatal(err)
		}
	}

	var flushes atomic.Int32
	_, handler := connectapi.NewHandler(connectapi.Options{Store: b.store, Hub: b.hub})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler.ServeHTTP(flushCounter{w, &flushes}, r)
	}))
	t.Cleanup(srv.Close)
	client := convov1connect.NewConversationServiceClient(srv.Client(), srv.URL, connect.WithProtoJSON())

	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Resuming from seq 0: every event of the conversation is ready at once.
	st, err := client.StreamConversation(streamCtx, connect.NewRequest(&convov1.StreamConversationRequest{
		ConversationId: sent.ConversationId, AfterSeq: new(int64),
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var last int64
	got := 0
	for got < deltas && st.Receive() {
		ev := st.Msg().GetEvent()
		if ev.Seq != last+1 {
			t.Fatalf("seq %d after %d", ev.Seq, last)
		}
		last = ev.Seq
		if ev.GetBlockDelta() != nil {
			got++
		}
	}
	if got < deltas {
		t.Fatalf("stream ended after %d deltas: %v", got, st.Err())
	}
	if n := flushes.Load(); n > 2 {
		t.Errorf("%d events that were ready together took %d flushes, want 1 (2 with the headers')", last, n)
	}

	// A live event, alone: it must be flushed at once, not held back.
	before := flushes.Load()
	if err := b.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: block, Delta: "live"}); err != nil {
		t.Fatal(err)
	}
	if !st.Receive() {
		t.Fatalf("stream ended: %v", st.Err())
	}
	if d := st.Msg().GetEvent().GetBlockDelta(); d.GetContent() != "live" {
		t.Fatalf("got %v, want the live delta", st.Msg())
	}
	if flushes.Load() == before {
		t.Error("the live event arrived without a flush")
	}
}

// TestStreamSendsHeadersAtOnce checks that a stream resumed with nothing to
// send yet still answers with its headers at once, so that a client knows
// the stream is open (and shows it live) before the next event.
func TestStreamSendsHeadersAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sent := b.send(t, b.client, "", "headers")
	conv, err := b.client.GetConversation(context.Background(), connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"conversationId":%q,"afterSeq":"%d"}`, sent.ConversationId, conv.Msg.Seq)
	frame := append([]byte{0, 0, 0, 0, byte(len(body))}, body...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+convov1connect.ConversationServiceStreamConversationProcedure, bytes.NewReader(frame))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no response headers for an idle resumed stream: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/connect+json" {
		t.Errorf("status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
}
