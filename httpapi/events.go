package httpapi

import (
	"errors"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/convo-dev/convo/connectapi"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/stream"
)

// protoJSON is the JSON the Connect API uses: proto3 JSON names, zero
// values omitted.
var protoJSON = protojson.MarshalOptions{}

// snapshotEvent names the SSE event that carries the snapshot.
const snapshotEvent = "snapshot"

// events serves GET /v1/conversations/{id}/events: the conversation's
// native events as Server-Sent Events. Without a resume point the stream
// starts with the snapshot (SSE event "snapshot") and the replay of the
// blocks still streaming, then every event as it commits, each named by
// its kind ("blockDelta", …) and carrying its seq as the SSE id. With
// Last-Event-ID (or ?after=N) it starts after that seq, without a snapshot
// while the events after it are all held. The stream ends when the
// subscriber falls behind or the server shuts down; EventSource then
// reconnects with the last id it received.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	owner, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id, err := conversationID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	after, err := resumePoint(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	sub, err := s.hub.Open(ctx, s.store, stream.OpenParams{OwnerID: owner, ConversationID: id, AfterSeq: after})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer sub.Close()
	var first []*convov1.StreamConversationResponse
	if st, ok := sub.Snapshot(); ok {
		if first, err = connectapi.StreamStart(st); err != nil {
			s.writeError(w, r, err)
			return
		}
		sub.ReleaseSnapshot()
	}

	out, err := startSSE(w, s.retry)
	if err != nil {
		return
	}
	// The snapshot and its replayed blocks are one unit: only its last SSE
	// event carries an id, so a client cut off in the middle of it has no
	// id from it and starts again from a snapshot, never from half a
	// state.
	for i, m := range first {
		var id string
		if i == len(first)-1 {
			id = strconv.FormatInt(sub.Cursor(), 10)
		}
		name, body := snapshotEvent, proto.Message(m.GetSnapshot())
		if ev := m.GetEvent(); ev != nil {
			name, body = eventName(ev), ev
		}
		if err := s.writeProto(out, id, name, body); err != nil {
			return
		}
	}
	for {
		item, err := s.next(ctx, sub, out)
		if err != nil {
			s.streamEnded(r, err, sub.Cursor())
			return
		}
		if item.Err != nil {
			s.logger.ErrorContext(ctx, "events stream: undecodable event", "conversation_id", id, "seq", item.Event.Seq, "err", item.Err)
			return
		}
		ev := item.Decoded.(*convov1.StreamConversationResponse).GetEvent()
		if err := s.writeProto(out, strconv.FormatInt(ev.Seq, 10), eventName(ev), ev); err != nil {
			return
		}
	}
}

func (s *server) writeProto(out *sseStream, id, name string, m proto.Message) error {
	data, err := protoJSON.Marshal(m)
	if err != nil {
		return err
	}
	return out.event(id, name, data)
}

// streamEnded logs why a stream ended, unless the client went away or the
// end is the ordinary kind (fell behind, shutting down, deleted), after
// which the client reconnects and resumes.
func (s *server) streamEnded(r *http.Request, err error, cursor int64) {
	switch {
	case r.Context().Err() != nil:
	case errors.Is(err, stream.ErrFellBehind), errors.Is(err, stream.ErrClosed), errors.Is(err, stream.ErrDeleted),
		errors.Is(err, stream.ErrEventsCompacted):
		s.logger.DebugContext(r.Context(), "stream ended; the client resumes", "path", r.URL.Path, "cursor", cursor, "reason", err)
	default:
		s.logger.WarnContext(r.Context(), "stream failed", "path", r.URL.Path, "cursor", cursor, "err", err)
	}
}

// eventName is the JSON name of the event's kind: "blockDelta", …
func eventName(ev *convov1.Event) string {
	m := ev.ProtoReflect()
	if f := m.WhichOneof(m.Descriptor().Oneofs().ByName("kind")); f != nil {
		return f.JSONName()
	}
	return "event"
}

// resumePoint reads where a stream resumes: the Last-Event-ID header that
// EventSource sends when it reconnects, or else the after query parameter.
// Neither: nil (start from a snapshot).
func resumePoint(r *http.Request) (*int64, error) {
	field, value := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if value == "" {
		field, value = "after", r.URL.Query().Get("after")
	}
	if value == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n < 0 {
		if len(value) > 32 {
			value = value[:32] + "…"
		}
		return nil, invalid(field, "%q is not a seq (a whole number, 0 or more)", value)
	}
	return &n, nil
}
