package connectapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"weak"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/runtime/protoiface"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

// compressMinBytes is the smallest message the handler compresses. A
// streamed delta is a few hundred bytes, which gzip barely shrinks, while
// setting up and flushing a gzip writer for it costs more CPU than sending
// it (measured: 26–30 µs per message, with 1,000 subscribers most of the
// server's time); snapshots and long tool outputs are still compressed.
const compressMinBytes = 1024

// codecOptions are the handler's codecs: connect's defaults ("proto", and
// "json" under both names connect registers), marshalling each message
// that shared holds once per codec for every stream that sends it.
func codecOptions(shared *sharedEncodings) []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCodec(&codec{name: "proto", shared: shared}),
		connect.WithCodec(&codec{name: "json", json: true, shared: shared}),
		connect.WithCodec(&codec{name: "json; charset=utf-8", json: true, shared: shared}),
	}
}

// sharedEncodings remembers the wire encodings of the StreamConversation
// messages that the hub hands, read-only, to every subscriber of a
// conversation, so that an event sent to 1,000 streams is marshalled once
// per codec instead of 1,000 times.
//
// Entries are keyed by weak pointer: a key matches only the very message it
// was made from (never a later one allocated at the same address), and
// does not keep it alive. When a message becomes unreachable (every
// subscriber has sent it and the hub's queues have dropped it), a cleanup
// removes its entry. So the cache holds encodings only of messages that
// are still live, at most one per codec each: its memory is bounded by the
// hub's queues, which bound the messages themselves.
type sharedEncodings struct {
	entries sync.Map // weak.Pointer[convov1.StreamConversationResponse] → *encodings
}

func newSharedEncodings() *sharedEncodings { return &sharedEncodings{} }

// entry returns m's entry, making it when m was not shared yet.
func (s *sharedEncodings) entry(m *convov1.StreamConversationResponse) *encodings {
	key := weak.Make(m)
	if e, ok := s.entries.Load(key); ok {
		return e.(*encodings)
	}
	e, loaded := s.entries.LoadOrStore(key, new(encodings))
	if !loaded {
		runtime.AddCleanup(m, s.forget, key)
	}
	return e.(*encodings)
}

// forget drops the entry of a message that has become unreachable.
func (s *sharedEncodings) forget(key weak.Pointer[convov1.StreamConversationResponse]) {
	s.entries.Delete(key)
}

// lookup returns the encodings of m when it was shared, or nil.
func (s *sharedEncodings) lookup(m any) *encodings {
	r, ok := m.(*convov1.StreamConversationResponse)
	if !ok || r == nil {
		return nil
	}
	e, ok := s.entries.Load(weak.Make(r))
	if !ok {
		return nil
	}
	return e.(*encodings)
}

// shareItem shares the message of an item the hub delivers and returns its
// entry. The item keeps the entry, so that the subscribers after the first
// find it without a lookup.
func (s *sharedEncodings) shareItem(item *wire.Item) *encodings {
	return item.Memo(func() any { return s.entry(item.Payload) }).(*encodings)
}

// itemEncoding returns the encoding in JSON or binary of the message of an
// item the hub delivers, made once for every stream that sends it.
func (s *sharedEncodings) itemEncoding(item *wire.Item, json bool) ([]byte, error) {
	return s.shareItem(item).get(item.Payload, json)
}

// marshalAs is connect's default encoding of m: protojson or proto.
func marshalAs(json bool, m proto.Message) ([]byte, error) {
	if json {
		return protojson.MarshalOptions{}.Marshal(m)
	}
	return proto.Marshal(m)
}

// len returns the number of entries, for tests.
func (s *sharedEncodings) len() int {
	n := 0
	s.entries.Range(func(any, any) bool { n++; return true })
	return n
}

// encodings are one shared message's encodings, each made on first use.
type encodings struct {
	binary, json encoding
}

// get returns m's encoding in JSON or binary.
func (e *encodings) get(m proto.Message, json bool) ([]byte, error) {
	slot := &e.binary
	if json {
		slot = &e.json
	}
	return slot.get(m, func(m proto.Message) ([]byte, error) { return marshalAs(json, m) })
}

type encoding struct {
	once sync.Once
	data []byte
	err  error
}

// get returns the encoding, making it with marshal the first time.
// Concurrent callers wait for the first; the bytes are never modified.
func (e *encoding) get(m proto.Message, marshal func(proto.Message) ([]byte, error)) ([]byte, error) {
	e.once.Do(func() { e.data, e.err = marshal(m) })
	return e.data, e.err
}

// codec is connect's default codec of its name, with the same wire format
// and errors (compare codec.go in connectrpc.com/connect: proto.Marshal,
// protojson with default options, unmarshalling JSON with DiscardUnknown),
// except that a shared message (see sharedEncodings) is marshalled once,
// and that JSON with a lone UTF-16 surrogate escape is refused naming the
// field (wire.CheckJSONSurrogates), as is JSON that breaks convo's rule for
// accepted JSON (wire.CheckJSONBody).
//
// It implements connect's optional MarshalAppend, which the handler uses:
// connect copies the result into its own pooled buffer, so the cached
// bytes are never handed out for writing. Marshal returns a copy, since
// connect recycles the slice Marshal returns.
type codec struct {
	name   string
	json   bool
	shared *sharedEncodings
}

var _ connect.Codec = (*codec)(nil)

func (c *codec) Name() string { return c.name }

// IsBinary reports whether the encoding is binary (connect's optional
// stable-codec interface).
func (c *codec) IsBinary() bool { return !c.json }

func (c *codec) marshal(m proto.Message) ([]byte, error) { return marshalAs(c.json, m) }

// cached returns m's shared encoding, or false when m is not shared.
func (c *codec) cached(m proto.Message) ([]byte, bool, error) {
	e := c.shared.lookup(m)
	if e == nil {
		return nil, false, nil
	}
	slot := &e.binary
	if c.json {
		slot = &e.json
	}
	data, err := slot.get(m, c.marshal)
	return data, true, err
}

func (c *codec) Marshal(message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, errNotProto(message)
	}
	if data, ok, err := c.cached(m); ok {
		if err != nil {
			return nil, err
		}
		return bytes.Clone(data), nil
	}
	return c.marshal(m)
}

func (c *codec) MarshalAppend(dst []byte, message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, errNotProto(message)
	}
	if data, ok, err := c.cached(m); ok {
		if err != nil {
			return nil, err
		}
		return append(dst, data...), nil
	}
	if c.json {
		return protojson.MarshalOptions{}.MarshalAppend(dst, m)
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, m)
}

func (c *codec) Unmarshal(data []byte, message any) error {
	m, ok := message.(proto.Message)
	if !ok {
		return errNotProto(message)
	}
	var err error
	if c.json {
		if len(data) == 0 {
			return errors.New("zero-length payload is not a valid JSON object")
		}
		// protojson refuses a lone surrogate too, but without naming the
		// field (connect makes this error InvalidArgument).
		if err := wire.CheckJSONSurrogates(data); err != nil {
			return err
		}
		// convo's rule for accepted JSON (numbers within a float64's
		// range, nesting, \u0000), naming the value's path: protojson
		// would refuse a number like 1e400 in a double field without
		// saying where, and nothing later should see such a value.
		if err := wire.CheckJSONBody(data); err != nil {
			return err
		}
		// Unknown fields are dropped so that clients and servers need not
		// run exactly the same schema version.
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, m)
	} else {
		err = proto.Unmarshal(data, m)
	}
	if err != nil {
		return fmt.Errorf("unmarshal into %T: %w", message, err)
	}
	return nil
}

// MarshalStable is connect's optional stable encoding, as its default
// codecs make it (never cached: the cache holds the ordinary encoding).
func (c *codec) MarshalStable(message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, errNotProto(message)
	}
	if !c.json {
		return proto.MarshalOptions{Deterministic: true}.Marshal(m)
	}
	data, err := protojson.MarshalOptions{}.Marshal(m)
	if err != nil {
		return nil, err
	}
	compacted := bytes.NewBuffer(data[:0])
	if err := json.Compact(compacted, data); err != nil {
		return nil, err
	}
	return compacted.Bytes(), nil
}

func errNotProto(message any) error {
	if _, ok := message.(protoiface.MessageV1); ok {
		return fmt.Errorf("%T uses github.com/golang/protobuf, but connect-go only supports google.golang.org/protobuf: see https://go.dev/blog/protobuf-apiv2", message)
	}
	return fmt.Errorf("%T doesn't implement proto.Message", message)
}
