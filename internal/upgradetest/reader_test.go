package upgradetest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/wire/view"
)

// reader streams one conversation from one server (StreamConversation)
// and folds it as a client does, resuming after its last event when the
// stream drops.
type reader struct {
	server       *server
	conversation string
	mu           sync.Mutex
	view         *view.Conversation
	seq          int64
	streams      int
}

func follow(ctx context.Context, s *server, conversation string) *reader {
	r := &reader{server: s, conversation: conversation}
	go func() {
		client := convov1connect.NewConversationServiceClient(http.DefaultClient, s.url)
		for ctx.Err() == nil {
			r.stream(ctx, client)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return r
}

func (r *reader) stream(ctx context.Context, client convov1connect.ConversationServiceClient) {
	req := &convov1.StreamConversationRequest{ConversationId: r.conversation}
	r.mu.Lock()
	r.streams++
	if r.view != nil {
		seq := r.seq
		req.AfterSeq = &seq
	}
	r.mu.Unlock()
	st, err := client.StreamConversation(ctx, connect.NewRequest(req))
	if err != nil {
		return
	}
	defer st.Close()
	for st.Receive() {
		r.mu.Lock()
		if snap := st.Msg().GetSnapshot(); snap != nil {
			r.view, r.seq = view.New(snap), snap.Seq
		} else if ev := st.Msg().GetEvent(); ev != nil && r.view != nil {
			r.view.Apply(r.view.Read(ev)...)
			if !ev.Replay && ev.Seq > r.seq {
				r.seq = ev.Seq
			}
		}
		r.mu.Unlock()
	}
}

// differs returns how the reader's fold differs from got (a
// GetConversation), "" when it holds the same messages, statuses and
// blocks, or the fold has not reached got's seq yet ("behind").
func (r *reader) differs(got *convov1.GetConversationResponse) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.view == nil || r.seq < got.Seq {
		return fmt.Sprintf("behind: at seq %d of %d", r.seq, got.Seq)
	}
	if len(r.view.Messages) != len(got.Messages) {
		return fmt.Sprintf("%d messages, GetConversation %d", len(r.view.Messages), len(got.Messages))
	}
	for i, want := range got.Messages {
		m := r.view.Messages[i]
		if m.ID != want.Id || m.Role != want.Role || m.Status != want.Status {
			return fmt.Sprintf("message %d is %s %s %s, GetConversation's %s %s %s", i, m.ID, m.Role, m.Status, want.Id, want.Role, want.Status)
		}
		if len(m.Blocks) != len(want.Blocks) {
			return fmt.Sprintf("message %s has %d blocks, GetConversation's %d", m.ID, len(m.Blocks), len(want.Blocks))
		}
		for j, wb := range want.Blocks {
			b := m.Blocks[j]
			if b.ID != wb.Id || b.Type != wb.BlockType || b.Content() != wb.Content {
				return fmt.Sprintf("block %d of message %s is %s %s %q, GetConversation's %s %s %q", j, m.ID, b.ID, b.Type, b.Content(), wb.Id, wb.BlockType, wb.Content)
			}
		}
	}
	return ""
}
