package events

import (
	"net/http"
	"strconv"

	"google.golang.org/protobuf/proto"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

// snapshotEvent names the SSE event that carries the snapshot.
const snapshotEvent = "snapshot"

// Handler serves the SSE stream of a conversation's native events.
type Handler struct{ srv *httpx.Server }

// New returns the handler of GET /v1/conversations/{id}/events.
func New(srv *httpx.Server) *Handler { return &Handler{srv: srv} }

// ServeHTTP serves GET /v1/conversations/{id}/events: the conversation's
// native events as Server-Sent Events. Without a resume point the stream
// starts with the snapshot (SSE event "snapshot") and the replay of the
// blocks still streaming, then every event as it commits, each named by
// its kind ("blockDelta", …) and carrying its seq as the SSE id. With
// Last-Event-ID (or ?after=N) it starts after that seq, without a snapshot
// while the events after it are all held. The stream ends when the
// subscriber falls behind or the server shuts down; EventSource then
// reconnects with the last id it received. The events of pauses
// (inputRequested, …) come only with ?include_pause_events=true, and so
// do the snapshot's pendingInputs; without it each comes as a
// messageUpdated of the same seq (wire.WithoutPauseEvents). A
// branchSwitched comes only with ?include_branches=true; without it the
// stream ends before one, and EventSource's reconnect (after the last id,
// before the switch) starts from a snapshot of the new path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	owner, id, err := h.srv.Caller(r)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	after, err := resumePoint(r)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	pauses, err := boolParam(r, "include_pause_events")
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	branches, err := boolParam(r, "include_branches")
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	ctx := r.Context()
	sub, first, err := wire.OpenPauses(ctx, h.srv.Hub, stream.OpenParams{
		OwnerID: owner, ConversationID: id, AfterSeq: after, Branches: branches,
	}, pauses, h.srv.URLs)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	defer sub.Close()

	out, err := h.srv.StartSSE(w)
	if err != nil {
		return
	}
	defer out.End()
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
		if err := writeProto(out, id, name, body); err != nil {
			return
		}
	}
	for {
		item, err := h.srv.Next(ctx, r, sub, out)
		if err != nil {
			h.srv.StreamEnded(r, err, sub.Cursor())
			return
		}
		payload := item.Payload
		if !pauses {
			payload = wire.WithoutPauseEvents(payload)
		}
		ev := payload.GetEvent()
		if err := writeProto(out, strconv.FormatInt(ev.Seq, 10), eventName(ev), ev); err != nil {
			return
		}
	}
}

func writeProto(out *httpx.SSEWriter, id, name string, m proto.Message) error {
	data, err := httpx.ProtoJSON.Marshal(m)
	if err != nil {
		return err
	}
	return out.Event(id, name, data)
}

// eventName is the JSON name of the event's kind: "blockDelta", …
func eventName(ev *convov1.Event) string {
	m := ev.ProtoReflect()
	if f := m.WhichOneof(m.Descriptor().Oneofs().ByName("kind")); f != nil {
		return f.JSONName()
	}
	return "event"
}

// boolParam reads a boolean query parameter (include_pause_events,
// include_branches; absent: false).
func boolParam(r *http.Request, name string) (bool, error) {
	value := r.URL.Query().Get(name)
	if value == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(value)
	if err != nil {
		return false, wire.Invalid(name, "%q is not true or false", value)
	}
	return b, nil
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
		return nil, wire.Invalid(field, "%q is not a seq (a whole number, 0 or more)", value)
	}
	return &n, nil
}
