package events_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// TestEventsFlushOncePerBurst checks that a stream writes every event that
// is ready before it flushes: a client resuming 60 events behind gets
// them in a few writes (HTTP/1.1 chunks), not one write per event.
func TestEventsFlushOncePerBurst(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t)
	s := tb.Send(t, "local", uuid.Nil, "hello")
	after := tb.State(t, "local", s.ConversationID).Seq
	tb.StartPrompt(t, s.PromptID)
	block := tb.StartBlock(t, s.PromptID, "text", "{}")
	const deltas = 60
	for i := range deltas {
		tb.AppendText(t, block, fmt.Sprintf("word%d ", i))
	}
	last := tb.State(t, "local", s.ConversationID).Seq

	u, err := url.Parse(tb.EventsURL(s.ConversationID))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(apitest.WaitTimeout))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nLast-Event-ID: %d\r\n\r\n", u.Path, u.Host, after)

	r := bufio.NewReader(conn)
	for { // the status line and headers
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
	}
	// Read chunks until the one holding the last event's id.
	var chunks int
	var body strings.Builder
	for !strings.Contains(body.String(), "id: "+strconv.FormatInt(last, 10)+"\n") {
		sizeLine, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d chunks: %v (body so far %q)", chunks, err, body.String())
		}
		size, err := strconv.ParseInt(strings.TrimSpace(sizeLine), 16, 64)
		if err != nil || size == 0 {
			t.Fatalf("chunk size %q: %v", sizeLine, err)
		}
		if _, err := io.CopyN(&body, r, size+2); err != nil { // the chunk and its CRLF
			t.Fatal(err)
		}
		chunks++
	}
	if got := strings.Count(body.String(), "event: blockDelta\n"); got != deltas {
		t.Fatalf("%d blockDelta events, want %d", got, deltas)
	}
	// The first chunk is the retry field, sent as the stream opens; the
	// 62 events (a blockStart, 60 deltas, and promptStarted) are ready at
	// once and need a handful of writes at most, however they are split.
	if chunks > 8 {
		t.Errorf("%d chunks for %d events ready at once: the stream flushes per event, not per burst", chunks, last-after)
	}
}
