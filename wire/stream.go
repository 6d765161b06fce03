package wire

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/stream"
)

// Response is one StreamConversation message: a snapshot or an event.
type Response = convov1.StreamConversationResponse

// Hub, Subscription and Item are the stream package's, with the
// StreamConversation message of each event as its payload.
type (
	Hub          = stream.Hub[*Response]
	Subscription = stream.Subscription[*Response]
	Item         = stream.Item[*Response]
)

// NewHub returns a hub whose payloads are made by DecodeEvent (opts.Decode
// is set to it), the files the events' messages hold signed by urls (nil:
// none). The hub decodes an event once for all its subscribers, so they
// share one signed URL.
func NewHub(opts stream.HubOptions[*Response], urls FileURLs) *Hub {
	opts.Decode = DecodeSigned(urls)
	return stream.NewHub(opts)
}

// DecodeSigned returns DecodeEvent with the files the event's messages
// hold signed by urls (nil: none): a hub's Decode.
func DecodeSigned(urls FileURLs) func(conversation.Event) (*Response, error) {
	return func(e conversation.Event) (*Response, error) {
		r, err := DecodeEvent(e)
		if err != nil {
			return nil, err
		}
		SignFiles(urls, eventMessages(r.GetEvent())...)
		return r, nil
	}
}

// DecodeEvent turns a logged event into the StreamConversation message that
// carries it. The hub runs it once per event for all subscribers, and the
// Connect handler encodes the message once per codec for all of them.
func DecodeEvent(e conversation.Event) (*Response, error) {
	ev, err := Event(e)
	if err != nil {
		return nil, err
	}
	return &Response{Kind: &convov1.StreamConversationResponse_Event{Event: ev}}, nil
}

// Open opens a subscription on hub and returns the messages its stream
// starts with: when it starts from a snapshot, Start's; when it resumes
// after p.AfterSeq, none. The subscription's snapshot is released (its
// messages hold what a stream needs of it). Errors are Open's.
func Open(ctx context.Context, hub *Hub, p stream.OpenParams, urls FileURLs) (*Subscription, []*Response, error) {
	return OpenPauses(ctx, hub, p, false, urls)
}

// OpenPauses opens as Open does, for a client that asked for the events of
// pauses when pauses is true: its snapshot then carries the pending input
// requests (Start). urls signs the files of the snapshot's messages.
func OpenPauses(ctx context.Context, hub *Hub, p stream.OpenParams, pauses bool, urls FileURLs) (*Subscription, []*Response, error) {
	sub, err := hub.Open(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	st, ok := sub.Snapshot()
	if !ok {
		return sub, nil, nil
	}
	first, err := Start(st, pauses, urls)
	if err != nil {
		sub.Close()
		return nil, nil, err
	}
	sub.ReleaseSnapshot()
	return sub, first, nil
}

// Start returns the messages a stream starts with when it starts from the
// state st (a subscription's snapshot): the snapshot (completed blocks
// only, and when st left older messages out the token that pages them in),
// then for every block still streaming at st.Seq a replayed
// blockStart, one blockDelta with the text so far, and the block's tool
// call so far. Every protocol starts its streams with exactly these. With
// pauses (the client asked for the events of pauses) the snapshot carries
// st's pending input requests; without, it is exactly what it was before
// pauses existed. Its files' URLs are signed by urls (nil: none). It
// fails only for a state whose JSON payloads do not decode.
func Start(st conversation.State, pauses bool, urls FileURLs) ([]*Response, error) {
	completed := st.Completed()
	messages, err := Messages(completed.Messages)
	if err != nil {
		return nil, err
	}
	SignFiles(urls, messages...)
	snapshot := &convov1.Snapshot{Conversation: Conversation(st.Conversation), Messages: messages, Seq: st.Seq}
	if st.Older && len(st.Messages) > 0 {
		snapshot.OlderPageToken = EncodeMessagesToken(st.Messages[0].Position)
	}
	if pauses {
		if snapshot.PendingInputs, err = InputRequests(st.PendingInputs); err != nil {
			return nil, err
		}
	}
	out := []*Response{{Kind: &convov1.StreamConversationResponse_Snapshot{Snapshot: snapshot}}}
	for _, b := range st.Streaming() {
		events, err := replayBlock(b, st.Seq)
		if err != nil {
			return nil, err
		}
		for _, e := range events {
			out = append(out, &Response{Kind: &convov1.StreamConversationResponse_Event{Event: e}})
		}
	}
	return out, nil
}

// replayBlock synthesises the events that bring a client from "block
// absent" to the block as it stands at seq. They carry seq and replay=true.
func replayBlock(b conversation.Block, seq int64) ([]*convov1.Event, error) {
	event := func(kind proto.Message) *convov1.Event {
		e := NewEvent(seq, b.CreatedAt, kind)
		e.Replay = true
		return e
	}
	metadata, err := jsonStruct(b.Metadata)
	if err != nil {
		return nil, err
	}
	promptID, messageID, blockID := NullID(b.PromptID), b.MessageID.String(), b.ID.String()
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
	final, err := ToolCall(*b.ToolCall)
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
