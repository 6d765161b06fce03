package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
)

// A stalled reader: a client that sends its request and then never reads.
// Its receive buffer is made small, so the server's writes to it block
// as soon as little is in flight.

// stalledProtocols are the stream requests of every protocol, over HTTP/1.1
// (each opens its own connection) and, for gRPC, over h2c.
var stalledProtocols = []struct {
	name string
	open func(t *testing.T, m *Main, conversationID string) io.Closer
}{
	{"SSE", func(t *testing.T, m *Main, id string) io.Closer {
		return stalledHTTP1(t, m, "GET /v1/conversations/"+id+"/events HTTP/1.1\r\nHost: localhost\r\n\r\n")
	}},
	{"AGUI", func(t *testing.T, m *Main, id string) io.Closer {
		return stalledHTTP1(t, m, "GET /v1/conversations/"+id+"/agui HTTP/1.1\r\nHost: localhost\r\n\r\n")
	}},
	{"ConnectHTTP1", func(t *testing.T, m *Main, id string) io.Closer {
		body := envelope([]byte(`{"conversationId":"` + id + `"}`))
		return stalledHTTP1(t, m, fmt.Sprintf("POST /convo.v1.ConversationService/StreamConversation HTTP/1.1\r\n"+
			"Host: localhost\r\nContent-Type: application/connect+json\r\nConnect-Protocol-Version: 1\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	}},
	{"GRPCOverH2C", stalledGRPC},
}

// envelope frames msg as one Connect (or gRPC) stream message.
func envelope(msg []byte) []byte {
	out := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

// stalledHTTP1 sends request on a new connection with a 4 KiB receive
// buffer and never reads.
func stalledHTTP1(t *testing.T, m *Main, request string) io.Closer {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(m.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	return conn
}

// stalledGRPC opens StreamConversation over gRPC on its own h2c
// connection, whose flow-control windows are the smallest HTTP/2 allows
// a Go client, and never reads the response body.
func stalledGRPC(t *testing.T, m *Main, id string) io.Closer {
	t.Helper()
	tr := &http.Transport{Protocols: unencryptedHTTP2(), HTTP2: &http.HTTP2Config{
		MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10,
	}}
	// {1: conversation id} in protobuf: field 1, length-delimited.
	msg := append([]byte{0x0a, byte(len(id))}, id...)
	req, err := http.NewRequest(http.MethodPost, m.URL()+"/convo.v1.ConversationService/StreamConversation", strings.NewReader(string(envelope(msg))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return closerFunc(func() error {
		resp.Body.Close()
		tr.CloseIdleConnections()
		return nil
	})
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// liveHeap is the bytes of live heap objects after two collections (the
// second empties the sync.Pools the first left to their victim caches).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// fillForStalls starts a server without workers and with the given
// settings, and a conversation of 10 MB (100 replies of 100 KB).
func fillForStalls(t *testing.T, env map[string]string) (*Main, string) {
	t.Helper()
	all := map[string]string{"CONVO_WORKERS": "0", "CONVO_MAX_STREAMS_PER_USER": "1000", "CONVO_MAX_STREAMS": "1000"}
	for k, v := range env {
		all[k] = v
	}
	m := startMain(t, all)
	id, err := pgtest.FillConversation(context.Background(), m.Config.DatabaseURL, "local", 100, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	return m, id.String()
}

// TestStalledStreamsHoldLittle: 60 clients of each protocol that never
// read a 10 MB conversation's stream cost the server at most 1 MB each,
// because a snapshot holds only the latest messages (CONVO_SNAPSHOT_BYTES).
// Before snapshots were bounded each held the whole conversation, twice.
// It measures the live heap of this process, so it does not run in
// parallel with other tests.
func TestStalledStreamsHoldLittle(t *testing.T) {
	m, id := fillForStalls(t, nil)
	const streams = 60
	for _, p := range stalledProtocols {
		t.Run(p.name, func(t *testing.T) {
			before := liveHeap()
			var open []io.Closer
			for range streams {
				open = append(open, p.open(t, m, id))
			}
			eventually(t, "every stream has its subscription", func() bool { return m.hub.Stats().Subscribers == streams })
			// Let the server write what the clients' buffers take.
			time.Sleep(500 * time.Millisecond)
			held := int64(liveHeap()) - int64(before)
			perStream := held / streams
			t.Logf("%s: %d stalled streams hold %d KB (%d KB each)", p.name, streams, held>>10, perStream>>10)
			if perStream > 1<<20 {
				t.Errorf("%s: each stalled stream holds %d KB, want at most 1024 KB", p.name, perStream>>10)
			}
			for _, c := range open {
				c.Close()
			}
			eventually(t, "every stream has ended", func() bool { return m.hub.Stats().Subscribers == 0 })
		})
	}
}

// TestStalledStreamsAreCutOff: with snapshots as large as the whole 10 MB
// conversation, clients that never read are cut off once a write has
// waited CONVO_WRITE_TIMEOUT (the snapshot's write, or the first event's
// for an AG-UI stream, which writes its snapshot when a run starts), and what their streams held is released
// while the clients still hold their connections open.
func TestStalledStreamsAreCutOff(t *testing.T) {
	m, id := fillForStalls(t, map[string]string{"CONVO_WRITE_TIMEOUT": "2s", "CONVO_SNAPSHOT_BYTES": "67108864"})
	// Each stream's snapshot is the whole 10 MB conversation, so one
	// stream left holding it is over the bound of 1 MB a stream below,
	// whatever their number: five, as each snapshot written to a stalled
	// stream is most of the test's CPU.
	const streams = 5
	for _, p := range stalledProtocols {
		t.Run(p.name, func(t *testing.T) {
			before := liveHeap()
			opened := m.hub.Opened()
			var open []io.Closer
			for range streams {
				open = append(open, p.open(t, m, id))
			}
			defer func() {
				for _, c := range open {
					c.Close()
				}
			}()
			// The first may be cut off before the last opens.
			eventually(t, "every stream has had its subscription", func() bool { return m.hub.Opened() == opened+streams })
			// A new message: every stream has something to write (an
			// AG-UI stream its run, with the thread's 10 MB snapshot).
			client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
			if _, err := client.SendMessage(context.Background(), connect.NewRequest(&convov1.SendMessageRequest{
				ConversationId: id, Text: "one more",
			})); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			eventually(t, "every stalled stream is cut off", func() bool { return m.hub.Stats().Subscribers == 0 })
			t.Logf("%s: %d stalled streams cut off %v after they opened", p.name, streams, time.Since(start).Round(100*time.Millisecond))
			// What is left is what the clients' sides hold (the h2c
			// client's 64 KiB buffers), not 10 MB per stream.
			held := int64(liveHeap()) - int64(before)
			t.Logf("%s: %d KB held after the streams were cut off", p.name, held>>10)
			if held > streams<<20 {
				t.Errorf("%s: %d KB still held after the streams were cut off", p.name, held>>10)
			}
		})
	}
}

// TestStalledStreamIsCutWithinWriteTimeout: a client that opens a stream
// of a small conversation and then stops reading, while what it is sent
// fits the kernel's socket buffers, is cut off within the write timeout
// (1 s here) and a margin. No write of the server blocks, so no write
// deadline fires: the stall watcher (stall.go) sees the bytes queued on
// its socket that the client does not acknowledge, and closes the
// connection. Before it, such streams stayed open as long as their
// clients (past 166 s in an attack run).
func TestStalledStreamIsCutWithinWriteTimeout(t *testing.T) {
	if !stallWatchSupported {
		t.Skip("the stall watcher reads Linux's send queue")
	}
	const writeTimeout = time.Second
	m := startMain(t, map[string]string{"CONVO_WORKERS": "0", "CONVO_WRITE_TIMEOUT": writeTimeout.String(), "CONVO_WRITE_RATE": "0", "CONVO_MAX_ACTIVE_PROMPTS": "0"})
	id, err := pgtest.FillConversation(context.Background(), m.Config.DatabaseURL, "local", 5, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	watcher := m.listener.(*stallListener).w
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	for _, p := range []struct {
		name    string
		request string
	}{
		{"SSE", "GET /v1/conversations/" + id.String() + "/events HTTP/1.1\r\nHost: localhost\r\n\r\n"},
		{"ConnectHTTP1", func() string {
			body := envelope([]byte(`{"conversationId":"` + id.String() + `"}`))
			return fmt.Sprintf("POST /convo.v1.ConversationService/StreamConversation HTTP/1.1\r\n"+
				"Host: localhost\r\nContent-Type: application/connect+json\r\nConnect-Protocol-Version: 1\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}()},
	} {
		t.Run(p.name, func(t *testing.T) {
			const streams = 3
			cut := watcher.cutCount()
			var open []net.Conn
			for range streams {
				// Default buffers: the 50 KB snapshot fits them, and the
				// client never reads a byte.
				conn, err := net.Dial("tcp", strings.TrimPrefix(m.URL(), "http://"))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				if _, err := io.WriteString(conn, p.request); err != nil {
					t.Fatal(err)
				}
				open = append(open, conn)
			}
			eventually(t, "every stream has its subscription", func() bool { return m.hub.Stats().Subscribers == streams })
			// 450 KB of events: more than the clients' receive windows
			// take, far less than the server's send buffers hold.
			text := strings.Repeat("stalled ", 11_000)
			for range 5 {
				if _, err := client.SendMessage(context.Background(), connect.NewRequest(&convov1.SendMessageRequest{
					ConversationId: id.String(), Text: text,
				})); err != nil {
					t.Fatal(err)
				}
			}
			sent := time.Now()
			deadline := sent.Add(writeTimeout + 5*time.Second)
			for m.hub.Stats().Subscribers > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d stalled streams still open %v after their last event (write timeout %v)",
						m.hub.Stats().Subscribers, streams, time.Since(sent).Round(100*time.Millisecond), writeTimeout)
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("%s: %d stalled streams cut off %v after their last event", p.name, streams, time.Since(sent).Round(10*time.Millisecond))
			if got := watcher.cutCount() - cut; got != streams {
				t.Errorf("the stall watcher cut %d connections; want %d (a write deadline cut the others: the test's events did not fit the buffers)", got, streams)
			}
		})
	}
}
