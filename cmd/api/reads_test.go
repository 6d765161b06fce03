package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
)

// stalledReads are the whole-conversation reads, each as a client that
// sends its request and never reads the answer.
var stalledReads = []struct {
	name    string
	request func(id string) string
}{
	{"GetConversation", func(id string) string {
		body := `{"conversationId":"` + id + `","includePauseEvents":true}`
		return fmt.Sprintf("POST /convo.v1.ConversationService/GetConversation HTTP/1.1\r\n"+
			"Host: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}},
	{"History", func(id string) string {
		return "GET /v1/conversations/" + id + "/history HTTP/1.1\r\nHost: localhost\r\n\r\n"
	}},
	{"AISDKMessages", func(id string) string {
		return "GET /v1/ai-sdk/chat/" + id + "/messages HTTP/1.1\r\nHost: localhost\r\n\r\n"
	}},
}

// TestStalledReadsHoldLittle: 100 clients that ask for a 10 MB
// conversation (GetConversation, the history export, the AI SDK's
// messages) and never read the answer hold less than 100 MB of the
// server in all: each answer is the latest messages that fit
// CONVO_SNAPSHOT_BYTES, with a page token for the rest. Before, each held
// the whole conversation (100 GetConversation calls took the server from
// 33 MB to 2,009 MB). The read cap is off here, to measure the bound. It
// measures the live heap of this process, so it does not run in parallel
// with other tests.
func TestStalledReadsHoldLittle(t *testing.T) {
	m, id := fillForStalls(t, map[string]string{"CONVO_MAX_READS_PER_USER": "0"})
	const reads = 100
	// A read that is read: the latest messages, and a token for the rest.
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	got, err := client.GetConversation(context.Background(), connect.NewRequest(&convov1.GetConversationRequest{ConversationId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if size := proto.Size(got.Msg); size > 1<<20 || got.Msg.GetOlderPageToken() == "" || len(got.Msg.GetMessages()) == 0 {
		t.Fatalf("GetConversation of a 10 MB conversation: %d messages, %d KB, olderPageToken %q; want the latest that fit 256 KiB, and a token",
			len(got.Msg.GetMessages()), size>>10, got.Msg.GetOlderPageToken())
	}
	for _, p := range stalledReads {
		t.Run(p.name, func(t *testing.T) {
			before := liveHeap()
			var open []io.Closer
			for range reads {
				open = append(open, stalledHTTP1(t, m, p.request(id)))
			}
			defer func() {
				for _, c := range open {
					c.Close()
				}
			}()
			// Let the server read and answer as far as the clients'
			// buffers take.
			time.Sleep(3 * time.Second)
			held := int64(liveHeap()) - int64(before)
			t.Logf("%s: %d stalled reads of a 10 MB conversation hold %d KB (%d KB each)", p.name, reads, held>>10, held/reads>>10)
			if held > 100<<20 {
				t.Errorf("%s: %d stalled reads hold %d MB; want under 100 MB", p.name, reads, held>>20)
			}
		})
	}
}

// TestReadCap: a user's whole-conversation reads running at once are
// capped (CONVO_MAX_READS_PER_USER), every protocol together, each held
// until its answer is written: with the cap's worth of stalled reads
// open, the next read is refused (resource_exhausted, HTTP 429 on /v1/,
// both with Retry-After); once they end, reads go through again.
func TestReadCap(t *testing.T) {
	const capacity = 3
	// Answers larger than the kernel's socket buffers, so that a stalled
	// read's handler waits in its write and holds its place.
	m, id := fillForStalls(t, map[string]string{"CONVO_MAX_READS_PER_USER": fmt.Sprint(capacity), "CONVO_SNAPSHOT_BYTES": "67108864"})
	var open []io.Closer
	for i := range capacity {
		open = append(open, stalledHTTP1(t, m, stalledReads[i%len(stalledReads)].request(id)))
	}
	get := func(path, body string) *http.Response {
		t.Helper()
		var resp *http.Response
		var err error
		if body == "" {
			resp, err = http.Get(m.URL() + path)
		} else {
			resp, err = http.Post(m.URL()+path, "application/json", strings.NewReader(body))
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp
	}
	// The cap is the user's, whatever the conversation: the probes read a
	// small one, so that each costs little on a loaded machine.
	small, err := pgtest.FillConversation(context.Background(), m.Config.DatabaseURL, "local", 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	getConversation := func() *http.Response {
		return get("/convo.v1.ConversationService/GetConversation", `{"conversationId":"`+small.String()+`"}`)
	}
	// The stalled reads take their places as the server reads them.
	var resp *http.Response
	deadline := time.Now().Add(30 * time.Second)
	for resp = getConversation(); resp.StatusCode == http.StatusOK && time.Now().Before(deadline); resp = getConversation() {
		time.Sleep(20 * time.Millisecond)
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("GetConversation past the cap: %s, Retry-After %q; want 429 (resource_exhausted) with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	for _, path := range []string{"/v1/conversations/" + small.String() + "/history", "/v1/ai-sdk/chat/" + small.String() + "/messages"} {
		if resp := get(path, ""); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s past the cap: %s, Retry-After %q; want 429 with Retry-After", path, resp.Status, resp.Header.Get("Retry-After"))
		}
	}
	for _, c := range open {
		c.Close()
	}
	eventually(t, "reads go through once the stalled ones ended", func() bool { return getConversation().StatusCode == http.StatusOK })
}
