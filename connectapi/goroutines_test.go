package connectapi_test

import (
	"bytes"
	"context"
	"net/http"
	"runtime"
	"testing"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// goroutinesWith counts the goroutines whose stack mentions every one of
// frames and none of without.
func goroutinesWith(frames []string, without string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
next:
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		for _, f := range frames {
			if !bytes.Contains(g, []byte(f)) {
				continue next
			}
		}
		if without != "" && bytes.Contains(g, []byte(without)) {
			continue
		}
		count++
	}
	return count
}

// TestStreamGoroutines checks what an open stream costs in goroutines: the
// one net/http runs its handler on, and none added by the hub or the
// handler (a waiting subscription is a parked select, not a goroutine).
// It counts every goroutine of the process, so it does not run in
// parallel with other tests.
func TestStreamGoroutines(t *testing.T) {
	b := setup(t)
	sent := b.send(t, b.client, "", "goroutines")
	const handler = "connectapi.(*service).StreamConversation"
	hubFrames := []string{"github.com/convo-dev/convo/stream."}
	before := goroutinesWith(hubFrames, handler)

	p := new(http.Protocols)
	p.SetHTTP1(true)
	client := convov1connect.NewConversationServiceClient(&http.Client{Transport: &http.Transport{Protocols: p}}, b.url, connect.WithProtoJSON())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const streams = 20
	for range streams {
		st, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: sent.ConversationId}))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if !st.Receive() {
			t.Fatalf("no snapshot: %v", st.Err())
		}
	}
	if got := goroutinesWith([]string{handler}, ""); got != streams {
		t.Errorf("%d goroutines run StreamConversation for %d open streams, want one each", got, streams)
	}
	if after := goroutinesWith(hubFrames, handler); after != before {
		t.Errorf("goroutines in package stream (besides the handlers): %d with %d open streams, %d before; want no goroutine per stream", after, streams, before)
	}
}
