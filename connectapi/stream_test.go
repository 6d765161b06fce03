package connectapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/internal/testwait"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

const streamTimeout = 20 * time.Second

// mark appends one more event (a rename) and returns its seq. A subscriber
// that has applied it has applied everything before it, replayed events
// included (those carry the snapshot's seq, so waiting for the last seq
// alone could stop between a snapshot and its replay).
func (tb *testBundle) mark(t testing.TB, conversationID string) int64 {
	t.Helper()
	if _, err := tb.store.RenameConversation(context.Background(), "local", uuid.MustParse(conversationID), "mark"); err != nil {
		t.Fatal(err)
	}
	return tb.state(t, conversationID).Seq
}

// waitReceived waits until sub has received n messages.
func waitReceived(t testing.TB, sub *subscriber, n int) []*convov1.StreamConversationResponse {
	t.Helper()
	deadline := time.After(streamTimeout)
	for {
		sub.mu.Lock()
		got, err := sub.received, sub.err
		sub.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if err != nil {
			t.Fatalf("stream ended after %d messages: %v", len(got), err)
		}
		select {
		case <-sub.changed:
		case <-deadline:
			t.Fatalf("received %d messages, want %d", len(got), n)
		}
	}
}

func (tb *testBundle) state(t testing.TB, conversationID string) *convov1.GetConversationResponse {
	t.Helper()
	return wholeConversation(t, tb.client, &convov1.GetConversationRequest{ConversationId: conversationID})
}

// wholeConversation is GetConversation with every older page put before
// its messages (ListMessages from its older_page_token on): the whole
// conversation, whatever the page size. The pages are read after it, and
// the messages before its window do not change but by feedback.
func wholeConversation(t testing.TB, client convov1connect.ConversationServiceClient, req *convov1.GetConversationRequest) *convov1.GetConversationResponse {
	t.Helper()
	ctx := context.Background()
	res, err := client.GetConversation(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	out := res.Msg
	for token := out.OlderPageToken; token != ""; {
		page, err := client.ListMessages(ctx, connect.NewRequest(&convov1.ListMessagesRequest{ConversationId: req.ConversationId, PageToken: token}))
		if err != nil {
			t.Fatal(err)
		}
		out.Messages = append(page.Msg.Messages, out.Messages...)
		token = page.Msg.NextPageToken
	}
	out.OlderPageToken = ""
	return out
}

// running sends a message and starts its prompt as a worker would.
func (tb *testBundle) running(t testing.TB) (*convov1.SendMessageResponse, uuid.UUID) {
	t.Helper()
	sent := tb.send(t, tb.client, "", "tell me something")
	id := uuid.MustParse(sent.PromptId)
	if err := tb.api.PromptStart(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	return sent, id
}

func (tb *testBundle) startBlock(t testing.TB, promptID uuid.UUID, blockType string) uuid.UUID {
	t.Helper()
	id, err := tb.api.BlockStart(context.Background(), apiq.BlockStartParams{PromptID: promptID, BlockType: blockType, Metadata: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (tb *testBundle) appendText(t testing.TB, block uuid.UUID, delta string) {
	t.Helper()
	if err := tb.api.BlockAppend(context.Background(), apiq.BlockAppendParams{BlockID: block, Delta: delta}); err != nil {
		t.Fatal(err)
	}
}

func TestStreamConversation(t *testing.T) {
	t.Parallel()
	forEachFeed(t, testStreamConversation)
}

// testStreamConversation runs the stream's behaviours under one feed.
func testStreamConversation(t *testing.T, feed string) {
	ctx := context.Background()
	opts := setupOptions{feed: feed}

	t.Run("LateJoinerSeesInFlightText", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, opts)
		sent, prompt := tb.running(t)
		text := tb.startBlock(t, prompt, "text")
		tb.appendText(t, text, "Hello, ")
		tb.appendText(t, text, "wor")

		sub := subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId})
		first := waitReceived(t, sub, 3)
		sub.mu.Lock()
		st := sub.state.clone()
		sub.mu.Unlock()
		// Snapshot without the streaming block, then exactly one replayed
		// blockStart and one blockDelta with the text so far.
		snap := first[0].GetSnapshot()
		if snap == nil || len(snap.Messages[1].Blocks) != 0 {
			t.Fatalf("first message = %v; want a snapshot without the streaming block", first[0])
		}
		if len(first) != 3 || first[1].GetEvent().GetBlockStart() == nil || !first[1].GetEvent().Replay ||
			first[2].GetEvent().GetBlockDelta().GetContent() != "Hello, wor" || !first[2].GetEvent().Replay {
			t.Fatalf("replay = %v", first[1:])
		}
		if got := st.block(sent.AssistantMessageId, text.String()).Content; got != "Hello, wor" {
			t.Fatalf("late joiner sees %q", got)
		}

		tb.appendText(t, text, "ld!")
		if err := tb.api.PromptComplete(ctx, prompt); err != nil {
			t.Fatal(err)
		}
		st = sub.waitSeq(t, tb.mark(t, sent.ConversationId), streamTimeout)
		final := tb.state(t, sent.ConversationId)
		if got := st.block(sent.AssistantMessageId, text.String()).Content; got != "Hello, world!" {
			t.Errorf("after the rest: %q, want each character exactly once", got)
		}
		if !st.equal(final) {
			t.Errorf("fold differs from GetConversation:\nfold %v\nget  %v", st.messages, final.Messages)
		}
	})

	t.Run("ReplaysToolCallInFlight", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, opts)
		sent, prompt := tb.running(t)
		block := tb.startBlock(t, prompt, "tool_use")
		tb.appendText(t, block, `{"q":1}`)
		call, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: block, Name: "search", Input: json.RawMessage(`{"q":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.api.ToolCallProgress(ctx, apiq.ToolCallProgressParams{ToolCallID: call, Output: "page 1 "}); err != nil {
			t.Fatal(err)
		}
		sub := subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId})
		if err := tb.api.ToolCallProgress(ctx, apiq.ToolCallProgressParams{ToolCallID: call, Output: "page 2"}); err != nil {
			t.Fatal(err)
		}
		if err := tb.api.ToolCallComplete(ctx, apiq.ToolCallCompleteParams{ToolCallID: call}); err != nil {
			t.Fatal(err)
		}
		st := sub.waitSeq(t, tb.mark(t, sent.ConversationId), streamTimeout)
		final := tb.state(t, sent.ConversationId)
		if st.blockByID(block.String()) == nil {
			sub.mu.Lock()
			for _, m := range sub.received {
				t.Logf("received %v", m)
			}
			sub.mu.Unlock()
			t.Fatalf("block missing: %s", st.diff(final))
		}
		if tc := st.blockByID(block.String()).ToolCall; tc.GetOutput() != "page 1 page 2" || tc.GetStatus() != "completed" {
			t.Errorf("tool call = %v", tc)
		}
		if !st.equal(final) {
			t.Errorf("fold differs from GetConversation: %s", st.diff(final))
		}
	})

	t.Run("AfterSeqResumesWithoutSnapshot", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, opts)
		sent, prompt := tb.running(t)
		text := tb.startBlock(t, prompt, "text")
		tb.appendText(t, text, "one ")
		mid := tb.state(t, sent.ConversationId).Seq
		tb.appendText(t, text, "two")

		sub := subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId, AfterSeq: &mid})
		first := waitReceived(t, sub, 1)[0]
		if first.GetEvent() == nil || first.GetEvent().Seq != mid+1 || first.GetEvent().GetBlockDelta().GetContent() != "two" {
			t.Fatalf("resume started with %v; want the event after %d and no snapshot", first, mid)
		}
	})

	t.Run("AfterSeqNotHeldGetsSnapshot", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, opts)
		sent := tb.send(t, tb.client, "", "hi")
		future := int64(1_000_000)
		sub := subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId, AfterSeq: &future})
		st := sub.waitSeq(t, tb.state(t, sent.ConversationId).Seq, streamTimeout)
		sub.mu.Lock()
		first := sub.received[0]
		sub.mu.Unlock()
		if first.GetSnapshot() == nil || !st.equal(tb.state(t, sent.ConversationId)) {
			t.Fatalf("first message %v; want a snapshot", first)
		}
	})

	t.Run("BadRequests", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, setupOptions{feed: feed, verifier: auth.NewHS256(testSecret)})
		alice, bob := tb.clientAs(tokenFor(t, "alice")), tb.clientAs(tokenFor(t, "bob"))
		sent := tb.send(t, alice, "", "private")
		negative := int64(-1)
		for name, tc := range map[string]struct {
			client convov1connect.ConversationServiceClient
			req    *convov1.StreamConversationRequest
			code   connect.Code
		}{
			"Unknown":          {bob, &convov1.StreamConversationRequest{ConversationId: uuid.NewString()}, connect.CodeNotFound},
			"Foreign":          {bob, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId}, connect.CodeNotFound},
			"Malformed":        {alice, &convov1.StreamConversationRequest{ConversationId: "nope"}, connect.CodeInvalidArgument},
			"Missing":          {alice, &convov1.StreamConversationRequest{}, connect.CodeInvalidArgument},
			"NegativeAfterSeq": {alice, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId, AfterSeq: &negative}, connect.CodeInvalidArgument},
			"NoToken":          {tb.client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId}, connect.CodeUnauthenticated},
		} {
			t.Run(name, func(t *testing.T) {
				stream, err := tc.client.StreamConversation(ctx, connect.NewRequest(tc.req))
				if err == nil {
					for stream.Receive() {
						t.Fatalf("received %v", stream.Msg())
					}
					err = stream.Err()
					stream.Close()
				}
				requireCode(t, err, tc.code)
			})
		}
		if st := tb.hub.Stats(); st.Subscribers != 0 || st.Topics != 0 {
			t.Errorf("refused streams left %+v in the hub", st)
		}
	})

	t.Run("ClientGoingAwayFreesEverything", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, opts)
		sent := tb.send(t, tb.client, "", "hi")
		baseline := runtime.NumGoroutine()
		var subs []*subscriber
		for range 20 {
			s := subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId})
			s.waitSeq(t, 1, streamTimeout)
			subs = append(subs, s)
		}
		if st := tb.hub.Stats(); st.Subscribers != 20 || st.Topics != 1 {
			t.Fatalf("hub = %+v, want 20 subscribers on 1 topic", st)
		}
		for _, s := range subs {
			s.close()
		}
		testwait.For(t, "subscriptions freed", func() bool { return tb.hub.Stats() == stream.Stats{} })
		// No goroutine is left behind (other tests run in parallel, so
		// allow for theirs: ours were 20 streams × client + handler).
		testwait.For(t, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= baseline+10 })
	})

	t.Run("SubscribersShareOneEncodingPerCodec", func(t *testing.T) {
		t.Parallel()
		// Many streams, half JSON (as connect-web) and half binary with
		// gzip (connect-go's defaults), send the same hub messages, each
		// encoded once per codec: every stream gets every event intact,
		// small ones uncompressed and large ones compressed. Run with -race.
		tb := setup(t, opts)
		sent, prompt := tb.running(t)
		clients := []convov1connect.ConversationServiceClient{
			tb.h2cClient(),
			tb.h2cClient(connect.WithProtoJSON()),
		}
		var subs []*subscriber
		for i := range 40 {
			subs = append(subs, subscribe(t, clients[i%2], &convov1.StreamConversationRequest{ConversationId: sent.ConversationId}))
		}
		block := tb.startBlock(t, prompt, "text")
		for i := range 20 {
			tb.appendText(t, block, fmt.Sprintf("delta %d; ", i))
		}
		tb.appendText(t, block, strings.Repeat("a long delta, compressed for gzip clients. ", 100))
		last := tb.mark(t, sent.ConversationId)
		final := tb.state(t, sent.ConversationId)
		var first []*convov1.StreamConversationResponse
		for i, s := range subs {
			if st := s.waitSeq(t, last, streamTimeout); !st.equal(final) {
				t.Fatalf("subscriber %d folds to a different state than GetConversation: %s", i, st.diff(final))
			}
			s.mu.Lock()
			got := slices.Clone(s.received)
			s.mu.Unlock()
			if i == 0 {
				first = got
				continue
			}
			if !slices.EqualFunc(got, first, func(a, b *convov1.StreamConversationResponse) bool { return proto.Equal(a, b) }) {
				t.Fatalf("subscriber %d received other messages than subscriber 0", i)
			}
		}
	})

	t.Run("DeletedConversationEndsStream", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, opts)
		sent := tb.send(t, tb.client, "", "hi")
		sub := subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId})
		sub.waitSeq(t, 1, streamTimeout)
		if _, err := tb.client.DeleteConversation(ctx, connect.NewRequest(&convov1.DeleteConversationRequest{ConversationId: sent.ConversationId})); err != nil {
			t.Fatal(err)
		}
		select {
		case <-sub.done:
		case <-time.After(streamTimeout):
			t.Fatal("stream still open after delete")
		}
		requireCode(t, sub.err, connect.CodeNotFound)
	})
}

// TestStreamConversationUndecodableEventIsInternal checks that an event
// the hub cannot decode ends the streams with Internal instead of
// crashing the server or skipping it.
func TestStreamConversationUndecodableEventIsInternal(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOptions{decode: func(e conversation.Event) (*wire.Response, error) {
		return nil, fmt.Errorf("event %d: cannot decode", e.Seq)
	}})
	sent := tb.send(t, tb.client, "", "hi")
	sub := subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId})
	tb.mark(t, sent.ConversationId)
	select {
	case <-sub.done:
	case <-time.After(streamTimeout):
		t.Fatal("stream still open after an event it cannot send")
	}
	requireCode(t, sub.err, connect.CodeInternal)
}

// TestStreamFoldsToState is the stream's invariant as a property: for
// random sequences of worker calls and subscribers joining at random
// moments, every subscriber's snapshot plus events folds to exactly the
// state GetConversation returns.
func TestStreamFoldsToState(t *testing.T) {
	t.Parallel()
	forEachFeed(t, testStreamFoldsToState)
}

func testStreamFoldsToState(t *testing.T, feed string) {
	seeds := uint64(4)
	if feed == feedLogical {
		// The feed changes only how events reach the hub (Hub.Deliver
		// instead of reads after a hint); two seeds cover that and keep
		// the suite's time down.
		seeds = 2
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) {
			t.Parallel()
			tb := setup(t, setupOptions{feed: feed})
			rng := rand.New(rand.NewPCG(seed, 42))
			w := &randomWorker{tb: tb, t: t, rng: rng}
			w.conversation = tb.send(t, tb.client, "", "start").ConversationId

			var subs []*subscriber
			for step := range 300 {
				w.step()
				if rng.IntN(25) == 0 || step == 0 {
					req := &convov1.StreamConversationRequest{ConversationId: w.conversation}
					if len(subs) > 0 && rng.IntN(3) == 0 {
						// Resume from a moment the first subscriber passed
						// (its fold there is the resumed client's state).
						from := subs[0].waitSeq(t, 0, streamTimeout).seq
						after := from + int64(rng.IntN(int(tb.state(t, w.conversation).Seq-from)+1))
						req.AfterSeq = &after
						// A resumed subscriber starts from a fold of the
						// events up to after, taken from another one.
						subs = append(subs, subscribeFrom(t, tb.client, req, foldUpTo(t, subs[0], after)))
						continue
					}
					subs = append(subs, subscribe(t, tb.client, req))
				}
			}
			last := tb.mark(t, w.conversation)
			final := tb.state(t, w.conversation)
			for i, s := range subs {
				st := s.waitSeq(t, last, streamTimeout)
				if !st.equal(final) {
					t.Errorf("subscriber %d folds to a different state than GetConversation at seq %d: %s", i, final.Seq, st.diff(final))
				}
			}
		})
	}
}

// foldUpTo folds what sub received up to seq: the client state a resumed
// stream continues from.
func foldUpTo(t testing.TB, sub *subscriber, seq int64) folded {
	t.Helper()
	sub.waitSeq(t, seq, streamTimeout)
	sub.mu.Lock()
	received := slices.Clone(sub.received)
	sub.mu.Unlock()
	var f folded
	for _, msg := range received {
		if e := msg.GetEvent(); e != nil && !e.Replay && e.Seq > seq {
			break
		}
		if err := f.apply(msg); err != nil {
			t.Fatal(err)
		}
	}
	if f.seq != seq {
		t.Fatalf("fold reached %d, want %d", f.seq, seq)
	}
	return f
}

// randomWorker makes random worker API calls, mostly legal ones.
type randomWorker struct {
	tb           *testBundle
	t            testing.TB
	rng          *rand.Rand
	conversation string
	prompt       uuid.UUID
	running      bool
	blocks       []uuid.UUID
	toolCalls    []uuid.UUID
}

func (w *randomWorker) step() {
	ctx := context.Background()
	q := w.tb.api
	var err error
	switch r := w.rng.IntN(100); {
	case !w.running:
		sent := w.tb.send(w.t, w.tb.client, w.conversation, "q "+randomText(w.rng))
		w.prompt = uuid.MustParse(sent.PromptId)
		if w.rng.IntN(5) == 0 {
			_, err = w.tb.store.CancelPrompt(ctx, "local", w.prompt)
			break
		}
		err = q.PromptStart(ctx, w.prompt)
		w.running, w.blocks, w.toolCalls = err == nil, nil, nil
	case r < 12:
		types := []string{"text", "reasoning", "tool_use", "structured", "tool_result"}
		var id uuid.UUID
		id, err = q.BlockStart(ctx, apiq.BlockStartParams{PromptID: w.prompt, BlockType: types[w.rng.IntN(len(types))], Metadata: []byte(`{"n":1}`)})
		if err == nil {
			w.blocks = append(w.blocks, id)
		}
	case r < 70 && len(w.blocks) > 0:
		err = q.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: w.blocks[w.rng.IntN(len(w.blocks))], Delta: randomText(w.rng)})
	case r < 76 && len(w.blocks) > 0:
		var id uuid.UUID
		id, err = q.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: w.blocks[w.rng.IntN(len(w.blocks))], Name: "tool", Input: []byte(`{"x":[1,null]}`)})
		if err == nil {
			w.toolCalls = append(w.toolCalls, id)
		}
	case r < 84 && len(w.toolCalls) > 0:
		err = q.ToolCallProgress(ctx, apiq.ToolCallProgressParams{ToolCallID: w.toolCalls[w.rng.IntN(len(w.toolCalls))], Output: randomText(w.rng)})
	case r < 87 && len(w.toolCalls) > 0:
		err = q.ToolCallComplete(ctx, apiq.ToolCallCompleteParams{ToolCallID: w.toolCalls[w.rng.IntN(len(w.toolCalls))]})
	case r < 89 && len(w.toolCalls) > 0:
		err = q.ToolCallFail(ctx, apiq.ToolCallFailParams{ToolCallID: w.toolCalls[w.rng.IntN(len(w.toolCalls))], Error: "boom"})
	case r < 93 && len(w.blocks) > 0:
		err = q.BlockEnd(ctx, apiq.BlockEndParams{BlockID: w.blocks[w.rng.IntN(len(w.blocks))], Metadata: []byte(`{"done":true}`)})
	case r < 95:
		_, err = w.tb.store.SubmitFeedback(ctx, "local", uuid.MustParse(w.tb.state(w.t, w.conversation).Messages[1].Id), "up", "ok")
	case r < 96:
		_, err = w.tb.store.RenameConversation(ctx, "local", uuid.MustParse(w.conversation), randomText(w.rng)+"x")
	case r < 97:
		_, err = w.tb.store.CancelPrompt(ctx, "local", w.prompt)
		w.running = false
	case r < 98:
		err = q.PromptFail(ctx, apiq.PromptFailParams{PromptID: w.prompt, Error: "model error"})
		w.running = false
	case r < 100:
		err = q.PromptComplete(ctx, w.prompt)
		w.running = false
	}
	_ = err // illegal calls are part of the property: they change nothing
}

func randomText(rng *rand.Rand) string {
	pieces := []string{"a", "bc", " ", "é", "日本", "🙂", "\n", "{\"k\":", "1}", "tok"}
	var b strings.Builder
	for range 1 + rng.IntN(4) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}
