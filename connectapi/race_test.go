package connectapi_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/internal/testwait"
)

// TestMembersRacingSends: the owner (alice) and a participant (pat) send
// into one conversation at the same moment, round after round (two
// goroutines released together), under the default send policy
// (enqueue), while two workers answer whatever they can claim. Every
// send is kept; the replies are claimed one at a time (never two of the
// conversation running at once) and in send order (the order of the
// user messages in the conversation), each exactly once, each below its
// own user message.
func TestMembersRacingSends(t *testing.T) {
	t.Parallel()
	const rounds = 30
	tb := setupAuth(t)
	alice, pat := tb.clientAs(tokenFor(t, "alice")), tb.clientAs(tokenFor(t, "pat"))
	conv := tb.send(t, alice, "", "the first message").ConversationId
	if _, err := addMember(alice, conv, "pat", "participant"); err != nil {
		t.Fatal(err)
	}

	// The workers: claim, write "reply <prompt id>", complete.
	ctx, stop := context.WithCancel(context.Background())
	var (
		running atomic.Int32
		mu      sync.Mutex
		claimed []string // prompt ids, in the order claimed
		workers sync.WaitGroup
	)
	work := func(name string) error {
		for ctx.Err() == nil {
			got, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: name, LeaseSeconds: 60})
			if err != nil {
				return err
			}
			if len(got) == 0 {
				// Poll: an idle worker would LISTEN; this one only needs
				// to come back soon.
				select {
				case <-ctx.Done():
				case <-time.After(2 * time.Millisecond):
				}
				continue
			}
			id := got[0].PromptID
			if n := running.Add(1); n > 1 {
				return fmt.Errorf("prompt %s claimed while %d other replies of the conversation run", id, n-1)
			}
			mu.Lock()
			claimed = append(claimed, id.String())
			mu.Unlock()
			if err := tb.api.PromptStart(ctx, id); err != nil {
				return err
			}
			block, err := tb.api.BlockStart(ctx, apiq.BlockStartParams{PromptID: id, BlockType: "text", Metadata: []byte("{}")})
			if err != nil {
				return err
			}
			if err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: block, Delta: "reply " + id.String()}); err != nil {
				return err
			}
			// Before the completion commits: the next reply may be
			// claimed only after it.
			running.Add(-1)
			if err := tb.api.PromptComplete(ctx, id); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range 2 {
		workers.Go(func() {
			if err := work(fmt.Sprintf("w%d", i)); err != nil && ctx.Err() == nil {
				t.Errorf("worker %d: %v", i, err)
			}
		})
	}
	defer func() { stop(); workers.Wait() }()

	type sent struct {
		who string
		res *convov1.SendMessageResponse
	}
	var sends []sent
	for r := range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		out := make([]sent, 2)
		for i, who := range []string{"alice", "pat"} {
			client := map[string]interface {
				SendMessage(context.Context, *connect.Request[convov1.SendMessageRequest]) (*connect.Response[convov1.SendMessageResponse], error)
			}{"alice": alice, "pat": pat}[who]
			wg.Go(func() {
				<-start
				res, err := client.SendMessage(context.Background(), connect.NewRequest(&convov1.SendMessageRequest{
					ConversationId: conv, Text: fmt.Sprintf("round %d from %s", r, who),
				}))
				if err != nil {
					t.Errorf("round %d, %s's send: %v", r, who, err)
					return
				}
				out[i] = sent{who, res.Msg}
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		sends = append(sends, out...)
	}

	var st *convov1.GetConversationResponse
	testwait.For(t, "every reply to be answered", func() bool {
		res, err := alice.GetConversation(context.Background(), connect.NewRequest(&convov1.GetConversationRequest{ConversationId: conv}))
		if err != nil {
			t.Fatal(err)
		}
		st = res.Msg
		for _, m := range st.Messages {
			if m.Role == "assistant" && m.Status != "completed" {
				return false
			}
		}
		return st.Conversation.GetActivePromptId() == ""
	})
	stop()
	workers.Wait()

	// The conversation: user, its reply, user, its reply, … every send's
	// user message in it once, every reply the one its prompt wrote.
	if want := 2 * (1 + 2*rounds); len(st.Messages) != want {
		t.Fatalf("%d messages, want %d", len(st.Messages), want)
	}
	var order []string // prompt ids, in the conversation's order
	users := map[string]bool{}
	for i := 0; i < len(st.Messages); i += 2 {
		u, a := exchangeAt(t, st.Messages, i)
		if len(a.Blocks) != 1 || a.Blocks[0].Content != "reply "+a.PromptId {
			t.Fatalf("reply %s of prompt %s: %v, want one block \"reply %s\"", a.Id, a.PromptId, a.Blocks, a.PromptId)
		}
		users[u.Id] = true
		order = append(order, a.PromptId)
	}
	for _, s := range sends {
		if !users[s.res.UserMessageId] || !slices.Contains(order, s.res.PromptId) {
			t.Errorf("%s's send %v is not in the conversation", s.who, s.res)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(claimed, order) {
		for i := range min(len(claimed), len(order)) {
			if claimed[i] != order[i] {
				t.Fatalf("reply %d claimed was prompt %s, but the conversation's reply %d is prompt %s: replies not answered in send order (%d claims for %d replies)",
					i, claimed[i], i, order[i], len(claimed), len(order))
			}
		}
		t.Fatalf("%d claims for %d replies: %v", len(claimed), len(order), claimed)
	}
}
