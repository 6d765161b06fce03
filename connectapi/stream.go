package connectapi

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

// StreamConversation sends the stream's start, then every event as it
// commits. A stream of the Connect protocol over HTTP/1.1 parks at its
// first idle moment and returns (park.go). Any other stream (HTTP/2, gRPC,
// gRPC-Web, or parking off) waits in the loop below, on the stack of the
// connection's goroutine: its frames are kept small (the start, the checks
// and the error paths are calls that return) so that, idle, the whole
// stack fits in a quarter of 16 KiB and the garbage collector shrinks it
// to 8 KiB. docs/performance.md has the measurement.
func (s *service) StreamConversation(ctx context.Context, req *connect.Request[convov1.StreamConversationRequest], out *connect.ServerStream[convov1.StreamConversationResponse]) error {
	// Every message that is ready is written before one flush (flush.go).
	flush := coalescingFrom(ctx)
	flush.hold()
	defer flush.release()
	sub, err := s.startStream(ctx, req.Msg, out)
	if err != nil {
		return err
	}
	// The start, and the headers even when a resumed stream has nothing to
	// send yet: the client knows the stream is open.
	flush.flushNow()
	for {
		item, ready, err := sub.TryNext(ctx)
		if err == nil && !ready && s.parking.park(ctx, flush, req, sub, req.Msg.GetIncludePauseEvents()) {
			// Idle: the stream goes on without this goroutine (park.go).
			return nil
		}
		if err == nil && !ready {
			// Nothing more is ready: send what was written, then wait.
			flush.release()
			item, err = sub.Next(ctx)
			flush.hold()
		}
		if err != nil {
			// A by-design end (fell behind, shutting down, compacted) is
			// an Unavailable that says where to resume (wire.Classify).
			sub.Close()
			return err
		}
		if err := s.sendEvent(item, req.Msg.GetIncludePauseEvents(), out); err != nil {
			sub.Close()
			return err
		}
	}
}

// startStream checks the request, opens the subscription and sends its
// start (a snapshot and the replayed blocks, or nothing on a resume).
//
//go:noinline
func (s *service) startStream(ctx context.Context, req *convov1.StreamConversationRequest, out *connect.ServerStream[convov1.StreamConversationResponse]) (*wire.Subscription, error) {
	if s.hub == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this server does not stream"))
	}
	owner, id, err := userAndID(ctx, "conversationId", req.GetConversationId())
	if err != nil {
		return nil, err
	}
	if req.AfterSeq != nil && req.GetAfterSeq() < 0 {
		return nil, wire.Invalid("afterSeq", "must not be negative, got %d", req.GetAfterSeq())
	}
	presence := req.GetIncludePresence() && s.presence != nil
	sub, first, err := wire.OpenPauses(ctx, s.hub, stream.OpenParams{
		OwnerID: owner, ConversationID: id, AfterSeq: req.AfterSeq, Branches: req.GetIncludeBranches(),
		Ephemeral: presence,
	}, req.GetIncludePauseEvents(), s.urls)
	if err != nil {
		return nil, err
	}
	if presence {
		// The list waits in the subscription's slot: it goes out after
		// the start below, never before the snapshot.
		s.joinPresence(sub, owner, id)
	}
	for _, m := range first {
		if err := out.Send(m); err != nil {
			sub.Close()
			return nil, err
		}
	}
	return sub, nil
}

// sendEvent sends one event the hub delivered, or a presence (an
// ephemeral item); an event of a pause only when the client asked for
// them (wire.WithoutPauseEvents).
//
//go:noinline
func (s *service) sendEvent(item *wire.Item, pauses bool, out *connect.ServerStream[convov1.StreamConversationResponse]) error {
	if item.Err != nil {
		return item.Err
	}
	if !pauses && wire.IsPauseEvent(item.Payload) {
		return out.Send(wire.WithoutPauseEvents(item.Payload))
	}
	// The hub hands this message to every subscriber of the conversation:
	// encode it once for all of them.
	s.shared.shareItem(item)
	return out.Send(item.Payload)
}
