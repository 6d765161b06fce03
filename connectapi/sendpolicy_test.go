package connectapi_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// sendPolicyOutcome is one of two racing sends.
type sendPolicyOutcome struct {
	res *convov1.SendMessageResponse
	err error
}

// raceSends sends two messages into conversationID at once, with policy.
func raceSends(client interface {
	SendMessage(context.Context, *connect.Request[convov1.SendMessageRequest]) (*connect.Response[convov1.SendMessageResponse], error)
}, conversationID string, policy convov1.SendPolicy) [2]sendPolicyOutcome {
	var out [2]sendPolicyOutcome
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := client.SendMessage(context.Background(), connect.NewRequest(&convov1.SendMessageRequest{
				ConversationId: conversationID, Text: "racing " + string(rune('a'+i)), SendPolicy: policy,
			}))
			out[i].err = err
			if err == nil {
				out[i].res = res.Msg
			}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// requireFolds asserts that every subscriber folds to GetConversation.
func requireFolds(t *testing.T, tb *testBundle, conversationID string, subs ...*subscriber) {
	t.Helper()
	last := tb.mark(t, conversationID)
	final := tb.state(t, conversationID)
	for i, s := range subs {
		if st := s.waitSeq(t, last, streamTimeout); !st.equal(final) {
			t.Errorf("subscriber %d folds to a different state than GetConversation at seq %d: %s", i, final.Seq, st.diff(final))
		}
	}
}

// TestSendPolicyRacingSends sends two messages at once into a
// conversation whose reply runs, under each policy: enqueue queues both
// (one turn each, none claimable yet), interrupt leaves exactly one reply
// to answer, reject refuses both; every subscriber (following from before
// and joining after) folds to GetConversation, through the queued
// messages' turn and a queued message taken back.
func TestSendPolicyRacingSends(t *testing.T) {
	t.Parallel()
	for _, policy := range []convov1.SendPolicy{convov1.SendPolicy_SEND_POLICY_ENQUEUE, convov1.SendPolicy_SEND_POLICY_INTERRUPT, convov1.SendPolicy_SEND_POLICY_REJECT} {
		t.Run(policy.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tb := setup(t)
			sent, running := tb.running(t)
			conv := sent.ConversationId
			req := &convov1.StreamConversationRequest{ConversationId: conv, IncludeBranches: true}
			before := subscribe(t, tb.client, req)
			defer before.close()

			out := raceSends(tb.client, conv, policy)
			after := subscribe(t, tb.client, req)
			defer after.close()
			requireFolds(t, tb, conv, before, after)

			st := tb.state(t, conv)
			var pending []*convov1.Message
			for _, m := range st.Messages {
				if m.Role == "assistant" && m.Status == "pending" {
					pending = append(pending, m)
				}
			}
			switch policy {
			case convov1.SendPolicy_SEND_POLICY_ENQUEUE:
				for i, o := range out {
					if o.err != nil || !o.res.Queued {
						t.Fatalf("send %d: %+v, %v; want queued", i, o.res, o.err)
					}
				}
				if len(pending) != 2 || !pending[0].Queued || !pending[1].Queued {
					t.Fatalf("pending replies %v, want two queued", pending)
				}
				// Take the second back, end the running reply: the first
				// starts; every fold follows.
				second := pending[1].ParentId
				if _, err := tb.client.DeleteQueuedMessage(ctx, connect.NewRequest(&convov1.DeleteQueuedMessageRequest{MessageId: second})); err != nil {
					t.Fatal(err)
				}
				if err := tb.api.PromptComplete(ctx, running); err != nil {
					t.Fatal(err)
				}
				requireFolds(t, tb, conv, before, after)
				first := pending[0].PromptId
				if err := tb.api.PromptStart(ctx, uuid.MustParse(first)); err != nil {
					t.Errorf("the first queued reply after the running one completed: %v", err)
				}
				_, err := tb.client.DeleteQueuedMessage(ctx, connect.NewRequest(&convov1.DeleteQueuedMessageRequest{MessageId: pending[0].ParentId}))
				if ce := requireCode(t, err, connect.CodeFailedPrecondition); !strings.Contains(ce.Message(), "not queued") {
					t.Errorf("delete after its turn came: %q", ce.Message())
				}
			case convov1.SendPolicy_SEND_POLICY_INTERRUPT:
				for i, o := range out {
					if o.err != nil || o.res.Queued {
						t.Fatalf("send %d: %+v, %v; want sent, not queued", i, o.res, o.err)
					}
				}
				// The later send interrupted the earlier one's reply too:
				// one reply is left to answer.
				if len(pending) != 1 || pending[0].Queued {
					t.Fatalf("pending replies %v, want one, not queued", pending)
				}
				if err := tb.api.PromptStart(ctx, uuid.MustParse(pending[0].PromptId)); err != nil {
					t.Errorf("the reply left: %v", err)
				}
				requireFolds(t, tb, conv, before, after)
			case convov1.SendPolicy_SEND_POLICY_REJECT:
				for i, o := range out {
					if ce := requireCode(t, o.err, connect.CodeFailedPrecondition); !strings.Contains(ce.Message(), "a reply is running") {
						t.Errorf("send %d: %q", i, ce.Message())
					}
				}
				if len(st.Messages) != 2 {
					t.Errorf("%d messages after two rejected sends, want 2", len(st.Messages))
				}
			}
		})
	}
}

// TestSetSendPolicyRPC: the conversation's policy is in its responses and
// its stream (sendPolicy), applies to sends that name none, and a value
// the enum does not define is InvalidArgument naming the field.
func TestSetSendPolicyRPC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	sent, _ := tb.running(t)
	conv := sent.ConversationId
	sub := subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: conv})
	defer sub.close()

	res, err := tb.client.SetSendPolicy(ctx, connect.NewRequest(&convov1.SetSendPolicyRequest{ConversationId: conv, SendPolicy: convov1.SendPolicy_SEND_POLICY_REJECT}))
	if err != nil || res.Msg.Conversation.SendPolicy != convov1.SendPolicy_SEND_POLICY_REJECT {
		t.Fatalf("SetSendPolicy: %v, %v", res, err)
	}
	requireFolds(t, tb, conv, sub)
	_, err = tb.client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: conv, Text: "x"}))
	requireCode(t, err, connect.CodeFailedPrecondition)

	for _, call := range []func() error{
		func() error {
			_, err := tb.client.SetSendPolicy(ctx, connect.NewRequest(&convov1.SetSendPolicyRequest{ConversationId: conv, SendPolicy: 42}))
			return err
		},
		func() error {
			_, err := tb.client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: conv, Text: "x", SendPolicy: 42}))
			return err
		},
	} {
		if ce := requireCode(t, call(), connect.CodeInvalidArgument); !strings.Contains(ce.Message(), "sendPolicy") {
			t.Errorf("message %q does not name sendPolicy", ce.Message())
		}
	}
	// UNSPECIFIED: back to the server's, enqueue.
	res, err = tb.client.SetSendPolicy(ctx, connect.NewRequest(&convov1.SetSendPolicyRequest{ConversationId: conv}))
	if err != nil || res.Msg.Conversation.SendPolicy != convov1.SendPolicy_SEND_POLICY_UNSPECIFIED {
		t.Fatalf("SetSendPolicy unspecified: %v, %v", res, err)
	}
	queued := tb.send(t, tb.client, conv, "later")
	if !queued.Queued {
		t.Error("a send naming no policy after the reset was not queued")
	}
	requireFolds(t, tb, conv, sub)
}
