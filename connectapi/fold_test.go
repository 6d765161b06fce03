package connectapi_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// folded is a client's view of a conversation: the snapshot with every
// event applied, the way the web app's reducer does it.
type folded struct {
	conversation *convov1.Conversation
	messages     []*convov1.Message
	seq          int64
	// pending are the open input requests (Snapshot.pending_inputs), for
	// a stream that asked for the events of pauses.
	pending []*convov1.InputRequest
	// older pages in the messages before the first held (a bounded
	// snapshot's or branchSwitched's older_page_token); empty when the
	// fold holds every message.
	older string
}

func (f *folded) input(toolCallID string) *convov1.InputRequest {
	for _, r := range f.pending {
		if r.ToolCallId == toolCallID {
			return r
		}
	}
	return nil
}

// endInput drops the request of a tool call that ended: it is no longer
// open.
func (f *folded) endInput(toolCallID string) {
	f.pending = slices.DeleteFunc(f.pending, func(r *convov1.InputRequest) bool { return r.ToolCallId == toolCallID })
}

func (f *folded) message(id string) *convov1.Message {
	for _, m := range f.messages {
		if m.Id == id {
			return m
		}
	}
	return nil
}

func (f *folded) block(messageID, blockID string) *convov1.Block {
	if m := f.message(messageID); m != nil {
		for _, b := range m.Blocks {
			if b.Id == blockID {
				return b
			}
		}
	}
	return nil
}

func (f *folded) blockByID(blockID string) *convov1.Block {
	for _, m := range f.messages {
		for _, b := range m.Blocks {
			if b.Id == blockID {
				return b
			}
		}
	}
	return nil
}

// clone returns a deep copy, safe to read while the original keeps folding.
func (f *folded) clone() folded {
	out := folded{seq: f.seq, older: f.older}
	if f.conversation != nil {
		out.conversation = proto.Clone(f.conversation).(*convov1.Conversation)
	}
	for _, m := range f.messages {
		out.messages = append(out.messages, proto.Clone(m).(*convov1.Message))
	}
	for _, r := range f.pending {
		out.pending = append(out.pending, proto.Clone(r).(*convov1.InputRequest))
	}
	return out
}

// apply folds one stream message in. It returns an error for anything a
// correct stream never sends: an event out of order, a delta to an unknown
// block.
func (f *folded) apply(res *convov1.StreamConversationResponse) error {
	if res.GetPresence() != nil {
		// Ephemeral: no seq, nothing to fold; never before the start.
		if f.conversation == nil {
			return errors.New("a presence before the snapshot")
		}
		return nil
	}
	if snap := res.GetSnapshot(); snap != nil {
		f.conversation = proto.Clone(snap.Conversation).(*convov1.Conversation)
		f.messages = nil
		for _, m := range snap.Messages {
			f.messages = append(f.messages, proto.Clone(m).(*convov1.Message))
		}
		f.seq = snap.Seq
		f.older = snap.OlderPageToken
		f.pending = nil
		for _, r := range snap.PendingInputs {
			f.pending = append(f.pending, proto.Clone(r).(*convov1.InputRequest))
		}
		return nil
	}
	e := res.GetEvent()
	if e.Replay {
		if e.Seq != f.seq {
			return fmt.Errorf("replayed event with seq %d after snapshot %d", e.Seq, f.seq)
		}
	} else {
		if e.Seq != f.seq+1 {
			return fmt.Errorf("event seq %d after %d: not the next one", e.Seq, f.seq)
		}
		f.seq = e.Seq
	}
	switch k := e.Kind.(type) {
	case *convov1.Event_MessageCreated:
		f.messages = append(f.messages, proto.Clone(k.MessageCreated.Message).(*convov1.Message))
	case *convov1.Event_MessageUpdated:
		if err := f.updateMessage(k.MessageUpdated.Message); err != nil {
			return err
		}
	case *convov1.Event_BlockStart:
		m := f.message(k.BlockStart.MessageId)
		if m == nil {
			return fmt.Errorf("block of unknown message %s", k.BlockStart.MessageId)
		}
		b := &convov1.Block{
			Id: k.BlockStart.BlockId, BlockType: k.BlockStart.BlockType, Status: "streaming",
			Metadata: proto.Clone(k.BlockStart.Metadata).(*structpb.Struct), Position: k.BlockStart.Position,
		}
		// Insert by position: a replayed block may belong before
		// completed blocks of the snapshot.
		i := len(m.Blocks)
		for i > 0 && m.Blocks[i-1].Position > b.Position {
			i--
		}
		m.Blocks = slices.Insert(m.Blocks, i, b)
	case *convov1.Event_BlockDelta:
		b := f.block(k.BlockDelta.MessageId, k.BlockDelta.BlockId)
		if b == nil || b.Status != "streaming" {
			return fmt.Errorf("delta to unknown or ended block %s", k.BlockDelta.BlockId)
		}
		b.Content += k.BlockDelta.Content
	case *convov1.Event_BlockEnd:
		b := f.block(k.BlockEnd.MessageId, k.BlockEnd.BlockId)
		if b == nil {
			return fmt.Errorf("end of unknown block %s", k.BlockEnd.BlockId)
		}
		b.Status = "completed"
		b.Metadata = proto.Clone(k.BlockEnd.Metadata).(*structpb.Struct)
	case *convov1.Event_ToolCallStarted:
		b := f.blockByID(k.ToolCallStarted.ToolCall.BlockId)
		if b == nil {
			return fmt.Errorf("tool call on unknown block")
		}
		b.ToolCall = proto.Clone(k.ToolCallStarted.ToolCall).(*convov1.ToolCall)
	case *convov1.Event_ToolCallProgress:
		b := f.blockByID(k.ToolCallProgress.BlockId)
		if b == nil || b.ToolCall == nil {
			return fmt.Errorf("progress of unknown tool call")
		}
		b.ToolCall.Output += k.ToolCallProgress.Output
		b.ToolCall.Status = "running"
	case *convov1.Event_ToolCallCompleted:
		if b := f.blockByID(k.ToolCallCompleted.ToolCall.BlockId); b != nil {
			b.ToolCall = proto.Clone(k.ToolCallCompleted.ToolCall).(*convov1.ToolCall)
		}
		f.endInput(k.ToolCallCompleted.ToolCall.Id)
	case *convov1.Event_ToolCallFailed:
		if b := f.blockByID(k.ToolCallFailed.ToolCall.BlockId); b != nil {
			b.ToolCall = proto.Clone(k.ToolCallFailed.ToolCall).(*convov1.ToolCall)
		}
		f.endInput(k.ToolCallFailed.ToolCall.Id)
	case *convov1.Event_InputRequested:
		f.pending = append(f.pending, proto.Clone(k.InputRequested.InputRequest).(*convov1.InputRequest))
		return f.updateMessage(k.InputRequested.Message)
	case *convov1.Event_PromptWaiting:
		return f.updateMessage(k.PromptWaiting.Message)
	case *convov1.Event_InputAnswered:
		r := f.input(k.InputAnswered.ToolCallId)
		if r == nil {
			return fmt.Errorf("answer to unknown input request %s", k.InputAnswered.ToolCallId)
		}
		r.Status, r.AnsweredAt = k.InputAnswered.Status, k.InputAnswered.AnsweredAt
		r.Answer = k.InputAnswered.Answer
		return f.updateMessage(k.InputAnswered.Message)
	case *convov1.Event_InputClaimed:
		r := f.input(k.InputClaimed.ToolCallId)
		if r == nil {
			return fmt.Errorf("claim of unknown input request %s", k.InputClaimed.ToolCallId)
		}
		r.ClaimedBy, r.ClaimExpiresAt = k.InputClaimed.ClaimedBy, k.InputClaimed.ClaimExpiresAt
		return f.updateMessage(k.InputClaimed.Message)
	case *convov1.Event_ConversationUpdated:
		f.conversation = keepRole(k.ConversationUpdated.Conversation, f.conversation)
	case *convov1.Event_HistoryCleared:
		f.conversation = keepRole(k.HistoryCleared.Conversation, f.conversation)
		f.messages = nil
		f.pending = nil
	case *convov1.Event_BranchSwitched:
		return f.switchBranch(k.BranchSwitched)
	}
	return nil
}

// switchBranch keeps the messages up to the fork, drops the rest and
// appends the new path's. A fork the client does not hold (older than
// its snapshot's window) keeps none: the event holds the whole path
// after it. One that left older messages out replaces every message, as
// a bounded snapshot does.
func (f *folded) switchBranch(b *convov1.BranchSwitched) error {
	keep := 0
	if b.OlderPageToken != "" {
		f.older = b.OlderPageToken
	} else if b.ForkMessageId != "" {
		keep = slices.IndexFunc(f.messages, func(m *convov1.Message) bool { return m.Id == b.ForkMessageId }) + 1
	} else {
		f.older = ""
	}
	f.messages = f.messages[:keep]
	for _, m := range b.Messages {
		f.messages = append(f.messages, proto.Clone(m).(*convov1.Message))
	}
	return nil
}

// loadOlder pages in every message before the first held, with
// ListMessages, as a client scrolling up does, skipping the messages it
// holds: after a branchSwitched whose fork was older than the window the
// token is the old window's, and its pages hold the new path before that
// window, which may include messages the event brought (a branch older
// than the window's messages).
func (f *folded) loadOlder(ctx context.Context, client convov1connect.ConversationServiceClient) error {
	for pages := 0; f.older != ""; pages++ {
		if pages > 1000 {
			return errors.New("paging older messages does not end")
		}
		res, err := client.ListMessages(ctx, connect.NewRequest(&convov1.ListMessagesRequest{
			ConversationId: f.conversation.GetId(), PageToken: f.older,
		}))
		if err != nil {
			return err
		}
		var page []*convov1.Message
		for _, m := range res.Msg.Messages {
			if f.message(m.Id) == nil {
				page = append(page, m)
			}
		}
		f.messages = append(page, f.messages...)
		f.older = res.Msg.NextPageToken
	}
	return nil
}

// updateMessage replaces a message's fields, keeping its blocks.
func (f *folded) updateMessage(msg *convov1.Message) error {
	m := f.message(msg.GetId())
	if m == nil {
		return fmt.Errorf("update of unknown message %s", msg.GetId())
	}
	blocks := m.Blocks
	proto.Reset(m)
	proto.Merge(m, msg)
	m.Blocks = blocks
	return nil
}

// diff describes the first difference between a fold and GetConversation.
func (f *folded) diff(got *convov1.GetConversationResponse) string {
	if !proto.Equal(f.conversation, got.Conversation) {
		return fmt.Sprintf("conversation:\nfold %v\nget  %v", f.conversation, got.Conversation)
	}
	if len(f.messages) != len(got.Messages) {
		return fmt.Sprintf("%d messages in the fold, %d in GetConversation", len(f.messages), len(got.Messages))
	}
	for i := range f.messages {
		if !proto.Equal(f.messages[i], got.Messages[i]) {
			return fmt.Sprintf("message %d:\nfold %v\nget  %v", i, f.messages[i], got.Messages[i])
		}
	}
	if len(f.pending) != len(got.PendingInputs) {
		return fmt.Sprintf("%d pending inputs in the fold, %d in GetConversation", len(f.pending), len(got.PendingInputs))
	}
	for i := range f.pending {
		if !proto.Equal(f.pending[i], got.PendingInputs[i]) {
			return fmt.Sprintf("pending input %d:\nfold %v\nget  %v", i, f.pending[i], got.PendingInputs[i])
		}
	}
	return fmt.Sprintf("seq %d vs %d", f.seq, got.Seq)
}

// equalState compares a fold with GetConversation's answer at the same seq.
func (f *folded) equal(got *convov1.GetConversationResponse) bool {
	want := &convov1.GetConversationResponse{Conversation: f.conversation, Messages: f.messages, Seq: f.seq, PendingInputs: f.pending}
	return proto.Equal(want, got)
}

// subscriber follows a conversation in the background, folding what it
// receives; it records every message and the error that ended the stream.
type subscriber struct {
	mu       sync.Mutex
	state    folded
	received []*convov1.StreamConversationResponse
	err      error
	changed  chan struct{}
	done     chan struct{}
	cancel   context.CancelFunc
}

func subscribe(t testing.TB, client convov1connect.ConversationServiceClient, req *convov1.StreamConversationRequest) *subscriber {
	t.Helper()
	return subscribeFrom(t, client, req, folded{})
}

// subscribeFrom subscribes with start as the client's state before the
// first message: for a resumed stream (req.AfterSeq), the fold of the
// events up to AfterSeq, which its first event must follow.
func subscribeFrom(t testing.TB, client convov1connect.ConversationServiceClient, req *convov1.StreamConversationRequest, start folded) *subscriber {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &subscriber{state: start, changed: make(chan struct{}, 1), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(s.done)
		// The call returns once the server sends its first message, so it
		// runs here, not in the test's goroutine.
		stream, err := client.StreamConversation(ctx, connect.NewRequest(req))
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		defer stream.Close()
		for stream.Receive() {
			msg := stream.Msg()
			s.mu.Lock()
			s.received = append(s.received, msg)
			if err := s.state.apply(msg); err != nil && s.err == nil {
				s.err = err
			}
			s.mu.Unlock()
			select {
			case s.changed <- struct{}{}:
			default:
			}
		}
		s.mu.Lock()
		if s.err == nil {
			s.err = stream.Err()
		}
		s.mu.Unlock()
	}()
	t.Cleanup(func() { s.close() })
	if req.AfterSeq == nil {
		// Established once its snapshot arrived: events written from now
		// on come after the snapshot and its replay.
		s.waitSeq(t, 0, streamTimeout)
		for {
			s.mu.Lock()
			n, err := len(s.received), s.err
			s.mu.Unlock()
			if n > 0 || err != nil {
				break
			}
			select {
			case <-s.changed:
			case <-s.done:
			}
		}
	}
	return s
}

func (s *subscriber) close() {
	s.cancel()
	<-s.done
}

// waitSeq waits until the subscriber has applied seq, failing the test on
// a stream error or after timeout.
func (s *subscriber) waitSeq(t testing.TB, seq int64, timeout time.Duration) folded {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		st, err := s.state.clone(), s.err
		s.mu.Unlock()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("stream failed at seq %d: %v", st.seq, err)
		}
		if st.seq >= seq {
			return st
		}
		select {
		case <-s.changed:
		case <-s.done:
		case <-deadline:
			t.Fatalf("stream reached seq %d of %d in %v", st.seq, seq, timeout)
		}
	}
}

// keepRole is the conversation c of an event with the caller's role kept
// from old: events carry no role (every member receives the same), so a
// client keeps the one its snapshot said.
func keepRole(c, old *convov1.Conversation) *convov1.Conversation {
	out := proto.Clone(c).(*convov1.Conversation)
	out.Role = old.GetRole()
	return out
}
