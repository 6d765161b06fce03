package connectapi_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/testwait"
	"github.com/convo-dev/convo/stream"
)

// http1JSON is a client as connect-web is one in a browser without
// HTTP/2: the Connect protocol, JSON, HTTP/1.1.
func http1JSON(url string) convov1connect.ConversationServiceClient {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return convov1connect.NewConversationServiceClient(&http.Client{Transport: &http.Transport{Protocols: p}}, url, connect.WithProtoJSON())
}

// TestParkedStreamEnds checks how a parked stream ends: the client leaving
// releases its subscription; a deleted conversation ends it with NotFound;
// the server shutting down ends it with a retryable Unavailable that says
// where to resume, and the server waits for that end to be written.
func TestParkedStreamEnds(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	client := http1JSON(tb.url)

	t.Run("client leaves", func(t *testing.T) {
		sent := tb.send(t, tb.client, "", "leaving")
		sub := subscribe(t, client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId})
		testwait.For(t, "the stream to park", func() bool { return tb.parking.Len() == 1 })
		sub.close()
		testwait.For(t, "the parked stream to end", func() bool { return tb.parking.Len() == 0 })
		testwait.For(t, "its subscription to be released", func() bool { return tb.hub.Stats() == stream.Stats{} })
	})

	t.Run("conversation deleted", func(t *testing.T) {
		sent := tb.send(t, tb.client, "", "deleted")
		sub := subscribe(t, client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId})
		testwait.For(t, "the stream to park", func() bool { return tb.parking.Len() == 1 })
		if _, err := tb.client.DeleteConversation(context.Background(), connect.NewRequest(&convov1.DeleteConversationRequest{ConversationId: sent.ConversationId})); err != nil {
			t.Fatal(err)
		}
		<-sub.done
		requireCode(t, sub.err, connect.CodeNotFound)
		testwait.For(t, "the parked stream to end", func() bool { return tb.parking.Len() == 0 })
	})

	t.Run("server shuts down", func(t *testing.T) {
		sent := tb.send(t, tb.client, "", "shutdown")
		sub := subscribe(t, client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId})
		testwait.For(t, "the stream to park", func() bool { return tb.parking.Len() == 1 })
		last := tb.mark(t, sent.ConversationId)
		sub.waitSeq(t, last, streamTimeout)
		tb.stop() // ends the hub, then waits for the parked streams
		<-sub.done
		ce := requireCode(t, sub.err, connect.CodeUnavailable)
		if want := "resume with afterSeq="; !strings.Contains(ce.Message(), want) {
			t.Errorf("end message %q does not say where to resume (%q…)", ce.Message(), want)
		}
		if tb.parking.Len() != 0 {
			t.Errorf("%d parked streams still open after the server stopped", tb.parking.Len())
		}
	})
}

// TestParkedSlowReader checks that a parked stream whose client stops
// reading never slows the others: its writes block on a full socket, its
// queue overflows while the others get every event, and it ends once its
// write times out, releasing its subscription.
func TestParkedSlowReader(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOptions{queueSize: 16})
	tb.parking.WriteTimeout = 2 * time.Second
	sent, promptID := tb.running(t)
	block := tb.startBlock(t, promptID, "text")

	// The slow client: a raw HTTP/1.1 connection that reads the response's
	// first bytes and then nothing.
	conn, err := net.Dial("tcp", strings.TrimPrefix(tb.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body, _ := protojson.Marshal(&convov1.StreamConversationRequest{ConversationId: sent.ConversationId})
	envelope := append([]byte{0, 0, 0, 0, byte(len(body))}, body...)
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/connect+json\r\nConnect-Protocol-Version: 1\r\nContent-Length: %d\r\n\r\n",
		convov1connect.ConversationServiceStreamConversationProcedure, len(envelope))
	conn.Write(envelope)
	if _, err := conn.Read(make([]byte, 512)); err != nil {
		t.Fatal(err)
	}

	fast := subscribe(t, http1JSON(tb.url), &convov1.StreamConversationRequest{ConversationId: sent.ConversationId})
	testwait.For(t, "both streams to park", func() bool { return tb.parking.Len() == 2 })

	// Far more than the socket buffers hold: the slow stream's writer
	// blocks, and its queue of 16 overflows. The fast reader gets each
	// event before the next is written, so it never falls behind itself.
	delta := strings.Repeat("x", 32<<10)
	seq := tb.state(t, sent.ConversationId).Seq
	for range 600 {
		tb.appendText(t, block, delta) // one blockDelta event
		seq++
		fast.waitSeq(t, seq, streamTimeout)
	}
	testwait.For(t, "the slow stream to end", func() bool { return tb.parking.Len() == 1 })
	fast.close()
	testwait.For(t, "every subscription to be released", func() bool { return tb.hub.Stats() == stream.Stats{} })
}
