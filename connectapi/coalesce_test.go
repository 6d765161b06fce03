package connectapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/convo-dev/convo/connectapi"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/postgres/dbq"
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
	if err := b.q.PromptStart(ctx, prompt); err != nil {
		t.Fatal(err)
	}
	block, err := b.q.BlockStart(ctx, dbq.BlockStartParams{PromptID: prompt, BlockType: "text", Metadata: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	const deltas = 50
	for range deltas {
		if err := b.q.BlockAppend(ctx, dbq.BlockAppendParams{BlockID: block, Delta: "x"}); err != nil {
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
	if err := b.q.BlockAppend(ctx, dbq.BlockAppendParams{BlockID: block, Delta: "live"}); err != nil {
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
