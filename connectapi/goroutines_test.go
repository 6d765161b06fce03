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
	"github.com/convo-dev/convo/internal/testwait"
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

// TestStreamGoroutines checks what an open stream costs in goroutines. On
// its handler (HTTP/2, gRPC, or parking off): the one net/http runs it on,
// none added by the hub or the handler (a waiting subscription is a parked
// select, not a goroutine). Parked (the Connect protocol over HTTP/1.1):
// no handler, no net/http goroutine, one small reader per connection, and
// no writer once what was ready is written. It counts every goroutine of
// the process, so it does not run in parallel with other tests.
func TestStreamGoroutines(t *testing.T) {
	for _, parked := range []bool{false, true} {
		t.Run(map[bool]string{false: "handler", true: "parked"}[parked], func(t *testing.T) {
			b := setup(t, setupOptions{noParking: !parked})
			sent := b.send(t, b.client, "", "goroutines")
			const (
				handler = "connectapi.(*service).StreamConversation"
				watcher = "connectapi.(*parkedStream).watch"
				writer  = "connectapi.(*parkedStream).write"
				conns   = "net/http.(*conn).serve"
			)
			hubFrames := []string{"github.com/convo-dev/convo/stream."}
			before := goroutinesWith(hubFrames, handler)
			connsBefore := goroutinesWith([]string{conns}, "")

			p := new(http.Protocols)
			p.SetHTTP1(true)
			client := convov1connect.NewConversationServiceClient(&http.Client{Transport: &http.Transport{Protocols: p}}, b.url, connect.WithProtoJSON())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const streams = 20
			var open []*connect.ServerStreamForClient[convov1.StreamConversationResponse]
			for range streams {
				st, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: sent.ConversationId}))
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				if !st.Receive() {
					t.Fatalf("no snapshot: %v", st.Err())
				}
				open = append(open, st)
			}
			if !parked {
				if got := goroutinesWith([]string{handler}, ""); got != streams {
					t.Errorf("%d goroutines run StreamConversation for %d open streams, want one each", got, streams)
				}
			} else {
				testwait.For(t, "every stream to park", func() bool { return b.parking.Len() == streams })
				// A new event wakes every stream, which writes it and lets
				// its writer go.
				b.mark(t, sent.ConversationId)
				for i, st := range open {
					if !st.Receive() {
						t.Fatalf("stream %d: no event after parking: %v", i, st.Err())
					}
				}
				testwait.For(t, "the writers to end", func() bool { return goroutinesWith([]string{writer}, "") == 0 })
				if got := goroutinesWith([]string{handler}, ""); got != 0 {
					t.Errorf("%d goroutines run StreamConversation for %d parked streams, want none", got, streams)
				}
				if got := goroutinesWith([]string{watcher}, ""); got != streams {
					t.Errorf("%d goroutines watch %d parked streams, want one each", got, streams)
				}
				if got := goroutinesWith([]string{conns}, ""); got > connsBefore {
					t.Errorf("net/http serves %d connections with %d streams parked, %d before; want no more", got, streams, connsBefore)
				}
			}
			if after := goroutinesWith(hubFrames, handler); after != before {
				t.Errorf("goroutines in package stream (besides the handlers): %d with %d open streams, %d before; want no goroutine per stream", after, streams, before)
			}
		})
	}
}
