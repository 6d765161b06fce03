package wire_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

// TestEveryEventKind decodes a logged event of every kind the Event oneof
// has, and builds one with NewEvent: both land in the field of that kind.
func TestEveryEventKind(t *testing.T) {
	fields := (&convov1.Event{}).ProtoReflect().Descriptor().Oneofs().ByName("kind").Fields()
	if fields.Len() < 16 {
		t.Fatalf("the Event oneof has %d kinds, want at least 16", fields.Len())
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range fields.Len() {
		fd := fields.Get(i)
		kind := fd.JSONName()
		t.Run(kind, func(t *testing.T) {
			e, err := wire.Event(conversation.Event{Seq: 9, Kind: conversation.EventKind(kind), Payload: []byte(`{}`), CreatedAt: at})
			if err != nil {
				t.Fatal(err)
			}
			if got := e.ProtoReflect().WhichOneof(fd.ContainingOneof()); got != fd {
				t.Fatalf("decoded into %v, want %s", got, fd.Name())
			}
			if e.GetSeq() != 9 || !e.GetCreatedAt().AsTime().Equal(at) {
				t.Errorf("seq %d at %v, want 9 at %v", e.GetSeq(), e.GetCreatedAt().AsTime(), at)
			}
			mt, err := protoregistry.GlobalTypes.FindMessageByName(fd.Message().FullName())
			if err != nil {
				t.Fatal(err)
			}
			built := wire.NewEvent(9, at, mt.New().Interface())
			if !proto.Equal(built, e) {
				t.Errorf("NewEvent = %v, decoded %v", built, e)
			}
		})
	}
	if _, err := wire.Event(conversation.Event{Seq: 1, Kind: "noSuchKind", Payload: []byte(`{}`)}); err == nil {
		t.Error("an unknown kind decoded")
	}
	if _, err := wire.Event(conversation.Event{Seq: 1, Kind: conversation.EventBlockDelta, Payload: []byte(`{"content": 5}`)}); err == nil {
		t.Error("a payload of the wrong shape decoded")
	}
}

// BenchmarkDecodeEvent is the hub's once-per-event cost: a block delta's
// payload into the message every subscriber sends.
func BenchmarkDecodeEvent(b *testing.B) {
	e := conversation.Event{Seq: 42, Kind: conversation.EventBlockDelta, CreatedAt: time.Now(),
		Payload: []byte(`{"promptId":"0b7f2b5e-6a55-4d0e-9c55-0c6f2f9a1b11","messageId":"5d1c9a52-1c1d-4c36-9b0e-7f3f0e7f1b22","blockId":"9a3e1f4b-8c2d-4e6f-a1b2-c3d4e5f6a7b8","content":"Hello, wor"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.DecodeEvent(e); err != nil {
			b.Fatal(err)
		}
	}
}
