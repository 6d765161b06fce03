package connectapi

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/stream"
)

// DecodeEvent turns a logged event into the StreamConversation message that
// carries it. The hub runs it once per event for all subscribers, and
// StreamConversation encodes the message once per codec for all of them.
func DecodeEvent(e conversation.Event) (any, error) {
	ev, err := eventToProto(e)
	if err != nil {
		return nil, err
	}
	return &convov1.StreamConversationResponse{Kind: &convov1.StreamConversationResponse_Event{Event: ev}}, nil
}

// StreamConversation sends the stream's start, then every event as it
// commits. An open stream is parked in the loop below, on the stack of
// the connection's goroutine: its frames are kept small (the start, the
// checks and the error paths are calls that return) so that, idle, the
// whole stack fits in a quarter of 16 KiB and the garbage collector
// shrinks it to 8 KiB. docs/performance.md has the measurement.
func (s *service) StreamConversation(ctx context.Context, req *connect.Request[convov1.StreamConversationRequest], out *connect.ServerStream[convov1.StreamConversationResponse]) error {
	// Every message that is ready is written before one flush (flush.go).
	flush := coalescingFrom(ctx)
	flush.hold()
	defer flush.release()
	sub, err := s.startStream(ctx, req.Msg, out)
	if err != nil {
		return err
	}
	defer sub.Close()
	// The start, and the headers even when a resumed stream has nothing to
	// send yet: the client knows the stream is open.
	flush.flushNow()
	for {
		item, ready, err := sub.TryNext(ctx)
		if err == nil && !ready {
			// Nothing more is ready: send what was written, then wait.
			flush.release()
			item, err = sub.Next(ctx)
			flush.hold()
		}
		if err != nil {
			return s.streamError(ctx, err, sub.Cursor())
		}
		if err := s.sendEvent(ctx, item, out); err != nil {
			return err
		}
	}
}

// startStream checks the request, opens the subscription and sends its
// start (a snapshot and the replayed blocks, or nothing on a resume).
//
//go:noinline
func (s *service) startStream(ctx context.Context, req *convov1.StreamConversationRequest, out *connect.ServerStream[convov1.StreamConversationResponse]) (*stream.Subscription, error) {
	const procedure = convov1connect.ConversationServiceStreamConversationProcedure
	if s.hub == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this server does not stream"))
	}
	owner, err := user(ctx)
	if err != nil {
		return nil, err
	}
	id, err := requireID("conversationId", req.GetConversationId())
	if err != nil {
		return nil, err
	}
	if req.AfterSeq != nil && req.GetAfterSeq() < 0 {
		return nil, invalidArgument("afterSeq", "must not be negative, got %d", req.GetAfterSeq())
	}
	sub, err := s.hub.Open(ctx, s.store, stream.OpenParams{OwnerID: owner, ConversationID: id, AfterSeq: req.AfterSeq})
	if err != nil {
		return nil, s.fail(ctx, procedure, err)
	}
	if st, ok := sub.Snapshot(); ok {
		first, err := snapshotMessages(st)
		if err != nil {
			sub.Close()
			return nil, s.fail(ctx, procedure, err)
		}
		for _, m := range first {
			if err := out.Send(m); err != nil {
				sub.Close()
				return nil, err
			}
		}
		sub.ReleaseSnapshot()
	}
	return sub, nil
}

// sendEvent sends one event the hub delivered.
//
//go:noinline
func (s *service) sendEvent(ctx context.Context, item *stream.Item, out *connect.ServerStream[convov1.StreamConversationResponse]) error {
	const procedure = convov1connect.ConversationServiceStreamConversationProcedure
	if item.Err != nil {
		return s.fail(ctx, procedure, item.Err)
	}
	msg, ok := item.Decoded.(*convov1.StreamConversationResponse)
	if !ok || msg == nil {
		return s.fail(ctx, procedure, fmt.Errorf("event %d of conversation %s decoded to %T; the hub's Decode must be DecodeEvent",
			item.Event.Seq, item.Event.ConversationID, item.Decoded))
	}
	// The hub hands this message to every subscriber of the conversation:
	// encode it once for all of them.
	s.shared.share(msg)
	return out.Send(msg)
}

// streamError ends a stream: nil when the client went away, a retryable
// Unavailable (with the seq to resume after) when the subscriber fell
// behind or the server is shutting down.
//
//go:noinline
func (s *service) streamError(ctx context.Context, err error, cursor int64) error {
	const procedure = convov1connect.ConversationServiceStreamConversationProcedure
	switch {
	case ctx.Err() != nil:
		return nil
	case errors.Is(err, stream.ErrFellBehind), errors.Is(err, stream.ErrClosed), errors.Is(err, stream.ErrEventsCompacted):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%w; resume with afterSeq=%d", err, cursor))
	}
	return s.fail(ctx, procedure, err)
}

// StreamStart returns the messages a StreamConversation stream starts with
// when it starts from the state st (a subscription's snapshot): the
// snapshot, then the replayed events of every block still streaming at
// st.Seq. Other protocols' adapters (package httpapi) start their streams
// with exactly these. It fails only for a state whose JSON payloads do not
// decode.
func StreamStart(st conversation.State) ([]*convov1.StreamConversationResponse, error) {
	return snapshotMessages(st)
}

// snapshotMessages is how a stream starts: the snapshot (completed blocks
// only), then for every block still streaming at its seq a replayed
// blockStart, one blockDelta with the text so far, and the block's tool
// call so far.
func snapshotMessages(st conversation.State) ([]*convov1.StreamConversationResponse, error) {
	completed := st.Completed()
	messages, err := messagesToProto(completed.Messages)
	if err != nil {
		return nil, err
	}
	out := []*convov1.StreamConversationResponse{{Kind: &convov1.StreamConversationResponse_Snapshot{Snapshot: &convov1.Snapshot{
		Conversation: conversationToProto(st.Conversation), Messages: messages, Seq: st.Seq,
	}}}}
	for _, b := range st.Streaming() {
		events, err := replayBlock(b, st.Seq)
		if err != nil {
			return nil, err
		}
		for _, e := range events {
			out = append(out, &convov1.StreamConversationResponse{Kind: &convov1.StreamConversationResponse_Event{Event: e}})
		}
	}
	return out, nil
}

// replayBlock synthesises the events that bring a client from "block
// absent" to the block as it stands at seq. They carry seq and replay=true.
func replayBlock(b conversation.Block, seq int64) ([]*convov1.Event, error) {
	event := func(kind any) *convov1.Event {
		e := &convov1.Event{Seq: seq, CreatedAt: ts(b.CreatedAt), Replay: true}
		switch k := kind.(type) {
		case *convov1.BlockStart:
			e.Kind = &convov1.Event_BlockStart{BlockStart: k}
		case *convov1.BlockDelta:
			e.Kind = &convov1.Event_BlockDelta{BlockDelta: k}
		case *convov1.ToolCallStarted:
			e.Kind = &convov1.Event_ToolCallStarted{ToolCallStarted: k}
		case *convov1.ToolCallProgress:
			e.Kind = &convov1.Event_ToolCallProgress{ToolCallProgress: k}
		case *convov1.ToolCallCompleted:
			e.Kind = &convov1.Event_ToolCallCompleted{ToolCallCompleted: k}
		case *convov1.ToolCallFailed:
			e.Kind = &convov1.Event_ToolCallFailed{ToolCallFailed: k}
		}
		return e
	}
	metadata, err := jsonStruct(b.Metadata)
	if err != nil {
		return nil, err
	}
	promptID, messageID, blockID := idString(b.PromptID), b.MessageID.String(), b.ID.String()
	events := []*convov1.Event{event(&convov1.BlockStart{
		PromptId: promptID, MessageId: messageID, BlockId: blockID, BlockType: b.Type, Metadata: metadata,
		Position: int32(b.Position),
	})}
	if b.Content != "" {
		events = append(events, event(&convov1.BlockDelta{
			PromptId: promptID, MessageId: messageID, BlockId: blockID, Content: b.Content,
		}))
	}
	if b.ToolCall == nil {
		return events, nil
	}
	final, err := toolCallToProto(*b.ToolCall)
	if err != nil {
		return nil, err
	}
	started := &convov1.ToolCall{
		Id: final.Id, BlockId: final.BlockId, Name: final.Name, Status: string(conversation.ToolCallStarted),
		Input: final.Input, StartedAt: final.StartedAt,
	}
	events = append(events, event(&convov1.ToolCallStarted{ToolCall: started, Input: final.Input}))
	if final.Output != "" {
		events = append(events, event(&convov1.ToolCallProgress{ToolCallId: final.Id, BlockId: blockID, Output: final.Output}))
	}
	switch conversation.ToolCallStatus(final.Status) {
	case conversation.ToolCallCompleted:
		events = append(events, event(&convov1.ToolCallCompleted{ToolCall: final}))
	case conversation.ToolCallFailed:
		events = append(events, event(&convov1.ToolCallFailed{ToolCall: final, Error: final.Error}))
	}
	return events, nil
}
