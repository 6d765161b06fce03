package connectapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// wireMessage is a message the codec tests send, and whether its binary
// encoding is deterministic (a google.protobuf.Struct with several keys is
// a map, which proto.Marshal writes in random order; protojson sorts it).
type wireMessage struct {
	name          string
	msg           *convov1.StreamConversationResponse
	deterministic bool
}

func eventResponse(e *convov1.Event) *convov1.StreamConversationResponse {
	return &convov1.StreamConversationResponse{Kind: &convov1.StreamConversationResponse_Event{Event: e}}
}

func testStruct(t testing.TB, v map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wireMessages are StreamConversation messages of every shape the stream
// carries, with text that JSON escapes.
func wireMessages(t testing.TB) []wireMessage {
	at := timestamppb.New(time.Date(2026, 11, 22, 5, 53, 0, 123456789, time.UTC))
	const id = "0193a5b6-1c2d-7e8f-9a0b-1c2d3e4f5a6b"
	input, err := structpb.NewValue(map[string]any{"query": "päivää <b>&</b>", "n": 3.5, "tags": []any{"a", nil, true}})
	if err != nil {
		t.Fatal(err)
	}
	return []wireMessage{
		{"Delta", eventResponse(&convov1.Event{Seq: 1 << 40, CreatedAt: at, Kind: &convov1.Event_BlockDelta{BlockDelta: &convov1.BlockDelta{
			PromptId: id, MessageId: id, BlockId: id, Content: "Hello, \"wörld\" 🙂\n\t<script>\u2028",
		}}}), true},
		{"BlockStartOneKey", eventResponse(&convov1.Event{Seq: 2, CreatedAt: at, Kind: &convov1.Event_BlockStart{BlockStart: &convov1.BlockStart{
			PromptId: id, MessageId: id, BlockId: id, BlockType: "text", Position: 3, Metadata: testStruct(t, map[string]any{"model": "m"}),
		}}}), true},
		{"BlockEndManyKeys", eventResponse(&convov1.Event{Seq: 3, CreatedAt: at, Kind: &convov1.Event_BlockEnd{BlockEnd: &convov1.BlockEnd{
			PromptId: id, MessageId: id, BlockId: id,
			Metadata: testStruct(t, map[string]any{"a": 1, "b": []any{true, nil}, "c": map[string]any{"d": "e", "f": -0.5}}),
		}}}), false},
		{"ToolCall", eventResponse(&convov1.Event{Seq: 4, CreatedAt: at, Replay: true, Kind: &convov1.Event_ToolCallStarted{ToolCallStarted: &convov1.ToolCallStarted{
			ToolCall: &convov1.ToolCall{Id: id, BlockId: id, Name: "search", Status: "started", Input: input, StartedAt: at},
			Input:    input,
		}}}), false},
		{"LargeOutput", eventResponse(&convov1.Event{Seq: 5, CreatedAt: at, Kind: &convov1.Event_ToolCallProgress{ToolCallProgress: &convov1.ToolCallProgress{
			ToolCallId: id, BlockId: id, Output: strings.Repeat("line of output ✓\n", 200),
		}}}), true},
		{"Snapshot", &convov1.StreamConversationResponse{Kind: &convov1.StreamConversationResponse_Snapshot{Snapshot: &convov1.Snapshot{
			Conversation: &convov1.Conversation{Id: id, Title: "a title", CreatedAt: at, UpdatedAt: at},
			Messages: []*convov1.Message{{Id: id, ConversationId: id, Role: "assistant", Status: "completed", Blocks: []*convov1.Block{
				{Id: id, BlockType: "text", Content: "done", Status: "completed"},
			}}},
			Seq: 7,
		}}}, true},
		{"Empty", &convov1.StreamConversationResponse{}, true},
	}
}

// streamContentTypes are the streaming protocols (and codecs) a client may
// ask for over HTTP/1.1; gRPC proper needs HTTP/2 and uses the same codec.
var streamContentTypes = []string{
	"application/connect+proto", "application/connect+json",
	"application/grpc-web+proto", "application/grpc-web+json",
}

// share marks m as shared, as shareItem does for the hub's messages: it
// must not change from now on, and the codecs encode it at most once each.
func (s *sharedEncodings) share(m *convov1.StreamConversationResponse) { s.entry(m) }

// streamBody serves a StreamConversation handler with opts that sends
// every message in msgs, three times over (sharing them first when share
// is set, as the real handler shares the hub's), and returns the raw
// response body a client asking for contentType reads.
func streamBody(t *testing.T, opts []connect.HandlerOption, shared *sharedEncodings, msgs []*convov1.StreamConversationResponse, contentType string, header http.Header) []byte {
	t.Helper()
	handler := connect.NewServerStreamHandler(convov1connect.ConversationServiceStreamConversationProcedure,
		func(_ context.Context, _ *connect.Request[convov1.StreamConversationRequest], out *connect.ServerStream[convov1.StreamConversationResponse]) error {
			for range 3 {
				for _, m := range msgs {
					if shared != nil {
						shared.share(m)
					}
					if err := out.Send(m); err != nil {
						return err
					}
				}
			}
			return nil
		}, opts...)
	req := &convov1.StreamConversationRequest{ConversationId: "c"}
	var payload []byte
	var err error
	if strings.HasSuffix(contentType, "json") {
		payload, err = protojson.Marshal(req)
	} else {
		payload, err = proto.Marshal(req)
	}
	if err != nil {
		t.Fatal(err)
	}
	body := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(payload)))
	return serveRaw(t, handler, convov1connect.ConversationServiceStreamConversationProcedure, contentType, header, append(body, payload...))
}

// serveRaw posts body to handler at path and returns the raw response body.
func serveRaw(t *testing.T, handler http.Handler, path, contentType string, header http.Header, body []byte) []byte {
	t.Helper()
	srv := httptest.NewServer(handler)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentType)
	// Go's transport would otherwise ask for gzip and undo it.
	if req.Header.Get("Accept-Encoding") == "" {
		req.Header.Set("Accept-Encoding", "identity")
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d: %s", contentType, res.StatusCode, raw)
	}
	return raw
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// envelope is one length-prefixed message of a streaming response.
type envelope struct {
	flags byte
	data  []byte
}

func envelopes(t *testing.T, body []byte) []envelope {
	t.Helper()
	var out []envelope
	for len(body) > 0 {
		if len(body) < 5 {
			t.Fatalf("truncated envelope prefix: %q", body)
		}
		n := binary.BigEndian.Uint32(body[1:5])
		if uint32(len(body)-5) < n {
			t.Fatalf("truncated envelope: want %d bytes, have %d", n, len(body)-5)
		}
		out = append(out, envelope{flags: body[0], data: body[5 : 5+n]})
		body = body[5+n:]
	}
	return out
}

// decodeWire decodes the messages of a streaming response (not its final
// end-of-stream envelope).
func decodeWire(t *testing.T, body []byte, contentType string) []*convov1.StreamConversationResponse {
	t.Helper()
	envs := envelopes(t, body)
	if len(envs) == 0 {
		t.Fatal("no envelopes")
	}
	var out []*convov1.StreamConversationResponse
	for _, e := range envs[:len(envs)-1] {
		data := e.data
		if e.flags&1 != 0 {
			data = gunzip(t, data)
		}
		m := new(convov1.StreamConversationResponse)
		var err error
		if strings.HasSuffix(contentType, "json") {
			err = protojson.Unmarshal(data, m)
		} else {
			err = proto.Unmarshal(data, m)
		}
		if err != nil {
			t.Fatalf("decode %q: %v", data, err)
		}
		out = append(out, m)
	}
	return out
}

func gunzip(t *testing.T, data []byte) []byte {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCodecMatchesConnectDefaults checks that the handler's codecs put on
// the wire exactly what connect's default codecs do, for shared messages
// (encoded once) and for all others.
func TestCodecMatchesConnectDefaults(t *testing.T) {
	t.Parallel()
	messages := wireMessages(t)

	t.Run("Stream", func(t *testing.T) {
		t.Parallel()
		for _, contentType := range streamContentTypes {
			for _, share := range []bool{true, false} {
				for _, wm := range messages {
					t.Run(fmt.Sprintf("%s/Shared=%v/%s", contentType, share, wm.name), func(t *testing.T) {
						t.Parallel()
						// Messages of their own: the subtests run in parallel.
						msg := proto.CloneOf(wm.msg)
						msgs := []*convov1.StreamConversationResponse{msg}
						want := streamBody(t, nil, nil, msgs, contentType, nil)
						shared := newSharedEncodings()
						var sharer *sharedEncodings // what the handler shares into
						if share {
							sharer = shared
						}
						got := streamBody(t, handlerOptions(nil, shared), sharer, msgs, contentType, nil)
						if want := btoi(share); shared.len() != want {
							t.Errorf("%d shared entries, want %d", shared.len(), want)
						}
						runtime.KeepAlive(msg)
						if wm.deterministic || strings.HasSuffix(contentType, "json") {
							if !bytes.Equal(got, want) {
								t.Fatalf("wire bytes differ from connect's defaults:\n got %q\nwant %q", got, want)
							}
						}
						gotMsgs, wantMsgs := decodeWire(t, got, contentType), decodeWire(t, want, contentType)
						if len(gotMsgs) != 3 || len(wantMsgs) != 3 {
							t.Fatalf("%d and %d messages, want 3 each", len(gotMsgs), len(wantMsgs))
						}
						for i := range gotMsgs {
							if !proto.Equal(gotMsgs[i], wantMsgs[i]) || !proto.Equal(gotMsgs[i], msg) {
								t.Errorf("message %d decodes to %v, want %v", i, gotMsgs[i], msg)
							}
						}
						// The end of the stream is the same too.
						gotEnvs, wantEnvs := envelopes(t, got), envelopes(t, want)
						if g, w := gotEnvs[len(gotEnvs)-1], wantEnvs[len(wantEnvs)-1]; g.flags != w.flags || !bytes.Equal(g.data, w.data) {
							t.Errorf("end of stream %q, want %q", g.data, w.data)
						}
					})
				}
			}
		}
	})

	t.Run("Unary", func(t *testing.T) {
		t.Parallel()
		// Other procedures' messages are never shared; they go through the
		// same codecs, including JSON under its second name.
		snapshot := messages[len(messages)-2].msg.GetSnapshot()
		res := &convov1.GetConversationResponse{Conversation: snapshot.Conversation, Messages: snapshot.Messages, Seq: snapshot.Seq}
		unary := func(opts []connect.HandlerOption) http.Handler {
			return connect.NewUnaryHandler(convov1connect.ConversationServiceGetConversationProcedure,
				func(context.Context, *connect.Request[convov1.GetConversationRequest]) (*connect.Response[convov1.GetConversationResponse], error) {
					return connect.NewResponse(res), nil
				}, opts...)
		}
		for _, contentType := range []string{"application/proto", "application/json", "application/json; charset=utf-8"} {
			body := []byte(`{"conversationId":"c"}`)
			if contentType == "application/proto" {
				body, _ = proto.Marshal(&convov1.GetConversationRequest{ConversationId: "c"})
			}
			want := serveRaw(t, unary(nil), convov1connect.ConversationServiceGetConversationProcedure, contentType, nil, body)
			got := serveRaw(t, unary(handlerOptions(nil, newSharedEncodings())), convov1connect.ConversationServiceGetConversationProcedure, contentType, nil, body)
			if !bytes.Equal(got, want) {
				t.Errorf("%s: body %q, want %q", contentType, got, want)
			}
		}
	})

	t.Run("SmallMessagesUncompressed", func(t *testing.T) {
		t.Parallel()
		// A client that accepts gzip (connect-go's default) gets small
		// messages as they are and large ones compressed.
		var msgs []*convov1.StreamConversationResponse
		for _, wm := range messages {
			msgs = append(msgs, proto.CloneOf(wm.msg))
		}
		header := http.Header{"Connect-Accept-Encoding": {"gzip"}}
		for _, contentType := range []string{"application/connect+proto", "application/connect+json"} {
			shared := newSharedEncodings()
			body := streamBody(t, handlerOptions(nil, shared), shared, msgs, contentType, header)
			envs := envelopes(t, body)
			for i, e := range envs[:len(envs)-1] {
				data := e.data
				compressed := e.flags&1 != 0
				if compressed {
					data = gunzip(t, data)
				}
				if big := len(data) >= compressMinBytes; compressed != big {
					t.Errorf("%s: message %d of %d bytes: compressed %v, want %v", contentType, i, len(data), compressed, big)
				}
			}
			got := decodeWire(t, body, contentType)
			for i, m := range got {
				if want := msgs[i%len(msgs)]; !proto.Equal(m, want) {
					t.Errorf("%s: message %d decodes to %v, want %v", contentType, i, m, want)
				}
			}
		}
	})
}

// TestSharedEncodingsConcurrent has many streams marshal one shared
// message at once with every codec (run it with -race): each gets the
// default encoding, the message is encoded once per codec, and what a
// caller does with its bytes does not reach the others.
func TestSharedEncodingsConcurrent(t *testing.T) {
	t.Parallel()
	msg := wireMessages(t)[0].msg // deterministic in both encodings
	wantBinary, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, err := protojson.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	shared := newSharedEncodings()
	var codecs []*codec
	for _, opt := range []string{"proto", "json", "json; charset=utf-8"} {
		codecs = append(codecs, &codec{name: opt, json: opt != "proto", shared: shared})
	}

	const streams, sends = 200, 20
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		wg.Go(func() {
			c := codecs[i%len(codecs)]
			want := wantBinary
			if c.json {
				want = wantJSON
			}
			prefix := []byte("prefix")
			for range sends {
				shared.share(msg)
				// As connect does: append to a pooled buffer, then write
				// over it once sent.
				out, err := c.MarshalAppend(prefix[:len(prefix):len(prefix)], msg)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(out[len(prefix):], want) || !bytes.Equal(out[:len(prefix)], prefix) {
					errs <- fmt.Errorf("%s: MarshalAppend = %q, want prefix + %q", c.name, out, want)
					return
				}
				clear(out)
				copied, err := c.Marshal(msg)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(copied, want) {
					errs <- fmt.Errorf("%s: Marshal = %q, want %q", c.name, copied, want)
					return
				}
				clear(copied)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := shared.len(); n != 1 {
		t.Errorf("%d entries for one message, want 1", n)
	}
	runtime.KeepAlive(msg)
}

// TestSharedMessageIsEncodedOnce checks that a shared message is encoded
// once per codec and the bytes reused: changed afterwards (which the hub
// never does), it is still sent as it was, while an unshared one is
// encoded anew.
func TestSharedMessageIsEncodedOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []*codec{{name: "proto"}, {name: "json", json: true}} {
		c.shared = newSharedEncodings()
		delta := &convov1.BlockDelta{Content: "before"}
		msg := eventResponse(&convov1.Event{Seq: 1, Kind: &convov1.Event_BlockDelta{BlockDelta: delta}})
		first, err := c.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		c.shared.share(msg)
		shared, err := c.MarshalAppend(nil, msg)
		if err != nil {
			t.Fatal(err)
		}
		delta.Content = "after"
		changed, err := c.Marshal(eventResponse(&convov1.Event{Seq: 1, Kind: &convov1.Event_BlockDelta{BlockDelta: delta}}))
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.MarshalAppend(nil, msg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(shared, first) || !bytes.Equal(again, first) {
			t.Errorf("%s: shared message sent as %q, then %q; want %q both times", c.name, shared, again, first)
		}
		if bytes.Equal(changed, first) {
			t.Errorf("%s: an unshared message was not encoded anew", c.name)
		}
	}
}

// TestSharedEncodingsForgetUnreachable checks the cache's bound: an entry
// lives only as long as its message.
func TestSharedEncodingsForgetUnreachable(t *testing.T) {
	t.Parallel()
	shared := newSharedEncodings()
	c := &codec{name: "proto", shared: shared}
	// Held until counted: a collection that other tests cause may come at
	// any time, and would forget a message that nothing holds any more.
	live := make([]*convov1.StreamConversationResponse, 100)
	for i := range live {
		m := eventResponse(&convov1.Event{Seq: int64(i), Kind: &convov1.Event_BlockDelta{BlockDelta: &convov1.BlockDelta{Content: strings.Repeat("x", 1000)}}})
		shared.share(m)
		if _, err := c.Marshal(m); err != nil {
			t.Fatal(err)
		}
		live[i] = m
	}
	// An unshared message is not remembered.
	if _, err := c.Marshal(eventResponse(&convov1.Event{Seq: 1})); err != nil {
		t.Fatal(err)
	}
	if n := shared.len(); n != 100 {
		t.Fatalf("%d entries, want 100", n)
	}
	runtime.KeepAlive(live)
	deadline := time.Now().Add(20 * time.Second)
	for shared.len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d entries left after their messages became unreachable", shared.len())
		}
		// Cleanups run after a collection, on their own goroutine.
		runtime.GC()
		runtime.Gosched()
	}
}
