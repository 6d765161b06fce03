package connectapi_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
)

// TestPauseEventsOnlyWhenAsked: a stream gets the events of a pause only
// when it asked for them (include_pause_events); a stream that did not
// ask gets a messageUpdated of the same seq in place of each, so its seqs
// have no gap. Over a parked stream (the Connect protocol over HTTP/1.1)
// and one that keeps its handler (gRPC over h2c).
func TestPauseEventsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tb := setup(t)
	sent := tb.send(t, tb.client, "", "use a tool that needs approval")
	clients := map[string]convov1connect.ConversationServiceClient{"ConnectHTTP1": tb.client, "GRPCOverH2C": tb.h2cClient(connect.WithGRPC())}
	type follower struct {
		name   string
		pauses bool
		stream *connect.ServerStreamForClient[convov1.StreamConversationResponse]
	}
	var followers []follower
	for name, client := range clients {
		for _, pauses := range []bool{false, true} {
			st, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{
				ConversationId: sent.ConversationId, IncludePauseEvents: pauses,
			}))
			if err != nil {
				t.Fatal(err)
			}
			if !st.Receive() || st.Msg().GetSnapshot() == nil {
				t.Fatalf("%s: no snapshot: %v", name, st.Err())
			}
			followers = append(followers, follower{name, pauses, st})
		}
	}

	// A worker pauses for approval of a tool call; then the owner approves.
	_, call, err := pgtest.PauseForApproval(ctx, tb.pool, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.pool.Exec(ctx, `SELECT convo.answer_input('local', $1, '{"approved": true}')`, call); err != nil {
		t.Fatal(err)
	}
	last := tb.state(t, sent.ConversationId).Seq

	for _, f := range followers {
		seq := int64(-1)
		var pauseEvents, replaced int
		for seq < last {
			if !f.stream.Receive() {
				t.Fatalf("%s (pauses %v): stream ended at seq %d of %d: %v", f.name, f.pauses, seq, last, f.stream.Err())
			}
			ev := f.stream.Msg().GetEvent()
			if seq >= 0 && ev.Seq != seq+1 {
				t.Fatalf("%s (pauses %v): seq %d after %d", f.name, f.pauses, ev.Seq, seq)
			}
			seq = ev.Seq
			switch ev.GetKind().(type) {
			case *convov1.Event_InputRequested, *convov1.Event_InputAnswered, *convov1.Event_PromptWaiting, *convov1.Event_InputClaimed:
				pauseEvents++
			case *convov1.Event_MessageUpdated:
				replaced++
			}
		}
		switch {
		case f.pauses && pauseEvents != 3:
			t.Errorf("%s asked for pause events: got %d, want inputRequested, promptWaiting, inputAnswered", f.name, pauseEvents)
		case !f.pauses && pauseEvents != 0:
			t.Errorf("%s did not ask for pause events but got %d", f.name, pauseEvents)
		case !f.pauses && replaced < 3:
			t.Errorf("%s did not ask: %d messageUpdated, want at least the 3 in place of the pause's events", f.name, replaced)
		}
	}
}
