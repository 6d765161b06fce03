package connectapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
)

// The users of the members tests: alice owns the conversation, pat is a
// participant, vic a viewer, rex a participant alice removed, and sam a
// stranger.
var memberRoles = []string{"alice", "pat", "vic", "rex", "sam"}

// sharedConv is a conversation alice shares: a user message with a
// completed reply, and what an action needs besides (needs).
type sharedConv struct {
	conv, user, reply string
	// prompt is a queued prompt (needs "queued"), comparison a comparison
	// (needs "comparison"), toolCall a pending approval (needs "input") or
	// client tool's run (needs "client_tool").
	prompt, comparison, toolCall string
}

// users returns a client per user of memberRoles.
func (tb *testBundle) users(t testing.TB) map[string]convov1connect.ConversationServiceClient {
	out := map[string]convov1connect.ConversationServiceClient{}
	for _, u := range memberRoles {
		out[u] = tb.clientAs(tokenFor(t, u))
	}
	return out
}

func addMember(c convov1connect.ConversationServiceClient, conv, user, role string) (*convov1.Member, error) {
	res, err := c.AddMember(context.Background(), connect.NewRequest(&convov1.AddMemberRequest{ConversationId: conv, UserId: user, Role: role}))
	if err != nil {
		return nil, err
	}
	return res.Msg.Member, nil
}

func removeMember(c convov1connect.ConversationServiceClient, conv, user string) error {
	_, err := c.RemoveMember(context.Background(), connect.NewRequest(&convov1.RemoveMemberRequest{ConversationId: conv, UserId: user}))
	return err
}

// shared makes a sharedConv of alice's, with pat, vic and rex (removed).
func (tb *testBundle) shared(t testing.TB, users map[string]convov1connect.ConversationServiceClient, needs string) sharedConv {
	t.Helper()
	alice := users["alice"]
	sent := tb.send(t, alice, "", "the shared zebra notes")
	tb.writeReply(t, sent.PromptId, "a reply")
	f := sharedConv{conv: sent.ConversationId, user: sent.UserMessageId, reply: sent.AssistantMessageId}
	for user, role := range map[string]string{"pat": "participant", "vic": "viewer", "rex": "participant"} {
		if _, err := addMember(alice, f.conv, user, role); err != nil {
			t.Fatal(err)
		}
	}
	if err := removeMember(alice, f.conv, "rex"); err != nil {
		t.Fatal(err)
	}
	switch needs {
	case "queued":
		f.prompt = tb.send(t, alice, f.conv, "more").PromptId
	case "comparison":
		res, err := alice.SendMessage(context.Background(), connect.NewRequest(&convov1.SendMessageRequest{
			ConversationId: f.conv, Text: "compare", Model: &convov1.ModelConfig{Model: "a"}, CompareModel: &convov1.ModelConfig{Model: "b"},
		}))
		if err != nil {
			t.Fatal(err)
		}
		f.comparison = res.Msg.ComparisonId
	case "input", "client_tool":
		kind := map[string]string{"input": "approval", "client_tool": "client_tool"}[needs]
		tb.send(t, alice, f.conv, "use a tool")
		var err error
		if _, f.toolCall, err = pgtest.PauseForInput(context.Background(), tb.pool, "w1", kind, `{}`); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// conversationOf is what GetConversation shows alice of conv, to compare
// before and after a refusal.
func conversationOf(t testing.TB, alice convov1connect.ConversationServiceClient, conv string) string {
	t.Helper()
	res, err := alice.GetConversation(context.Background(), connect.NewRequest(&convov1.GetConversationRequest{ConversationId: conv}))
	if err != nil {
		t.Fatal(err)
	}
	members, err := alice.ListMembers(context.Background(), connect.NewRequest(&convov1.ListMembersRequest{ConversationId: conv}))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := proto.Marshal(res.Msg)
	m, _ := proto.Marshal(members.Msg)
	return string(b) + string(m)
}

// TestMembersMatrix: every RPC on a shared conversation, as its owner, a
// participant, a viewer, a removed member and a stranger. Reads are the
// owner's and every member's; writes the owner's and participants'
// (a viewer's is PermissionDenied naming the role); renames, clears,
// deletes and member changes the owner's alone. A removed member and a
// stranger get NotFound, as for a conversation that does not exist.
// Every refusal changes nothing: the conversation and its members, as
// GetConversation and ListMembers show them, and every table's rows.
func TestMembersMatrix(t *testing.T) {
	t.Parallel()
	const (
		read  = "read"
		write = "write"
		owner = "owner"
	)
	type call func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error
	ctx := context.Background()
	actions := []struct {
		name, needs, level string
		call               call
	}{
		{"GetConversation", "", read, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: f.conv}))
			return err
		}},
		{"ListMessages", "", read, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.ListMessages(ctx, connect.NewRequest(&convov1.ListMessagesRequest{ConversationId: f.conv, PageToken: everyMessagesToken}))
			return err
		}},
		{"StreamConversation", "", read, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			s, err := c.StreamConversation(sctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: f.conv}))
			if err != nil {
				return err
			}
			defer s.Close()
			if !s.Receive() {
				return s.Err()
			}
			return nil
		}},
		{"ListMembers", "", read, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.ListMembers(ctx, connect.NewRequest(&convov1.ListMembersRequest{ConversationId: f.conv}))
			return err
		}},
		{"SendMessage", "", write, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: f.conv, Text: "hi"}))
			return err
		}},
		{"EditMessage", "", write, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.EditMessage(ctx, connect.NewRequest(&convov1.EditMessageRequest{ConversationId: f.conv, MessageId: f.user, Text: "edited"}))
			return err
		}},
		{"RegenerateReply", "", write, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.RegenerateReply(ctx, connect.NewRequest(&convov1.RegenerateReplyRequest{ConversationId: f.conv, MessageId: f.reply}))
			return err
		}},
		{"SwitchBranch", "", write, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.SwitchBranch(ctx, connect.NewRequest(&convov1.SwitchBranchRequest{ConversationId: f.conv, MessageId: f.user}))
			return err
		}},
		{"SubmitFeedback", "", write, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.SubmitFeedback(ctx, connect.NewRequest(&convov1.SubmitFeedbackRequest{MessageId: f.reply, Rating: convov1.Rating_RATING_UP}))
			return err
		}},
		{"CancelPrompt", "queued", write, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.CancelPrompt(ctx, connect.NewRequest(&convov1.CancelPromptRequest{PromptId: f.prompt}))
			return err
		}},
		{"VoteComparison", "comparison", write, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.VoteComparison(ctx, connect.NewRequest(&convov1.VoteComparisonRequest{ComparisonId: f.comparison, Preference: convov1.Preference_PREFERENCE_A}))
			return err
		}},
		{"AnswerInput", "input", write, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := answerInput(c, f.toolCall, approval(true, ""))
			return err
		}},
		{"ClaimInput", "client_tool", write, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := claimInput(c, f.toolCall, "tab-1", 30)
			return err
		}},
		{"RenameConversation", "", owner, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.RenameConversation(ctx, connect.NewRequest(&convov1.RenameConversationRequest{ConversationId: f.conv, Title: "renamed"}))
			return err
		}},
		{"ClearConversation", "", owner, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.ClearConversation(ctx, connect.NewRequest(&convov1.ClearConversationRequest{ConversationId: f.conv}))
			return err
		}},
		{"DeleteConversation", "", owner, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.DeleteConversation(ctx, connect.NewRequest(&convov1.DeleteConversationRequest{ConversationId: f.conv}))
			return err
		}},
		{"AddMember", "", owner, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := addMember(c, f.conv, "newcomer", "viewer")
			return err
		}},
		{"RemoveMemberOther", "", owner, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			other := "vic"
			if u == "vic" {
				other = "pat"
			}
			return removeMember(c, f.conv, other)
		}},
	}
	for _, a := range actions {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			tb := setupAuth(t)
			users := tb.users(t)
			for _, u := range memberRoles {
				f := tb.shared(t, users, a.needs)
				// What the role may do: alice everything, pat reads and
				// writes, vic reads; rex and sam nothing.
				want := connect.Code(0)
				switch {
				case u == "rex" || u == "sam":
					want = connect.CodeNotFound
				case u == "vic" && a.level != read, u == "pat" && a.level == owner:
					want = connect.CodePermissionDenied
				}
				before, rows := conversationOf(t, users["alice"], f.conv), tb.countRows(t)
				err := a.call(users[u], f, u)
				if want == 0 {
					if err != nil {
						t.Errorf("%s as %s: %v", a.name, u, err)
					}
					continue
				}
				ce := requireCode(t, err, want)
				if want == connect.CodePermissionDenied {
					role := map[string]string{"pat": "participant", "vic": "viewer"}[u]
					if !strings.Contains(ce.Message(), "a "+role+" may not") {
						t.Errorf("%s as %s: %q does not name the role", a.name, u, ce.Message())
					}
				}
				if want == connect.CodeNotFound && strings.Contains(ce.Message(), "may not") {
					t.Errorf("%s as %s: %q tells a non-member what it may not do", a.name, u, ce.Message())
				}
				if after, afterRows := conversationOf(t, users["alice"], f.conv), tb.countRows(t); after != before || afterRows != rows {
					t.Errorf("%s as %s was refused (%v) and changed something:\nrows before %s\nrows after  %s", a.name, u, ce.Code(), rows, afterRows)
				}
			}
		})
	}
}
