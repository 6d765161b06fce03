package connectapi_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/convo-dev/convo/auth"
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
		{"SetSendPolicy", "", owner, func(c convov1connect.ConversationServiceClient, f sharedConv, u string) error {
			_, err := c.SetSendPolicy(ctx, connect.NewRequest(&convov1.SetSendPolicyRequest{ConversationId: f.conv, SendPolicy: convov1.SendPolicy_SEND_POLICY_REJECT}))
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

// TestMembersListAndSender: ListConversations shows a shared conversation
// to its member with the member's role, beside the member's own; each
// user message says who sent it; membership changes are events of the
// conversation's stream, seen by every member's tab.
func TestMembersListAndSender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setupAuth(t)
	users := tb.users(t)
	f := tb.shared(t, users, "")
	own := tb.send(t, users["pat"], "", "pat's own").ConversationId
	viewed := tb.send(t, users["sam"], "", "sam's").ConversationId
	if _, err := addMember(users["sam"], viewed, "pat", "viewer"); err != nil {
		t.Fatal(err)
	}

	res, err := users["pat"].ListConversations(ctx, connect.NewRequest(&convov1.ListConversationsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]string{}
	for _, c := range res.Msg.Conversations {
		roles[c.Id] = c.Role
	}
	want := map[string]string{f.conv: "participant", own: "owner", viewed: "viewer"}
	if len(roles) != len(want) {
		t.Errorf("pat lists %v, want %v", roles, want)
	}
	for id, role := range want {
		if roles[id] != role {
			t.Errorf("pat lists %s as %q, want %q", id, roles[id], role)
		}
	}
	// A page of one at a time walks the same three, none twice.
	seen, token := map[string]bool{}, ""
	for range 4 {
		page, err := users["pat"].ListConversations(ctx, connect.NewRequest(&convov1.ListConversationsRequest{PageSize: 1, PageToken: token}))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Msg.Conversations {
			if seen[c.Id] {
				t.Errorf("page repeats %s", c.Id)
			}
			seen[c.Id] = true
		}
		if token = page.Msg.NextPageToken; token == "" {
			break
		}
	}
	if len(seen) != 3 {
		t.Errorf("pages of one showed %d conversations, want 3", len(seen))
	}
	// rex was removed: the conversation is gone from rex's list.
	if res, err := users["rex"].ListConversations(ctx, connect.NewRequest(&convov1.ListConversationsRequest{})); err != nil || len(res.Msg.Conversations) != 0 {
		t.Errorf("rex lists %v (%v), want nothing", res.Msg.GetConversations(), err)
	}

	// Open a stream as vic, then pat sends: the message names pat.
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	s, err := users["vic"].StreamConversation(sctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: f.conv}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Receive() {
		t.Fatal(s.Err())
	}
	snap := s.Msg().GetSnapshot()
	if snap.GetConversation().GetRole() != "viewer" {
		t.Errorf("vic's snapshot says role %q, want viewer", snap.GetConversation().GetRole())
	}
	if m := snap.GetMessages()[0]; m.GetSenderId() != "alice" {
		t.Errorf("alice's message says sender %q", m.GetSenderId())
	}
	sent := tb.send(t, users["pat"], f.conv, "from pat")
	if _, err := addMember(users["alice"], f.conv, "vic", "participant"); err != nil {
		t.Fatal(err)
	}
	var gotSender, gotMember bool
	for !(gotSender && gotMember) && s.Receive() {
		e := s.Msg().GetEvent()
		if m := e.GetMessageCreated().GetMessage(); m.GetId() == sent.UserMessageId {
			gotSender = m.GetSenderId() == "pat"
			if !gotSender {
				t.Errorf("pat's message says sender %q", m.GetSenderId())
				break
			}
		}
		if m := e.GetMemberAdded().GetMember(); m != nil {
			gotMember = m.GetUserId() == "vic" && m.GetRole() == "participant" && m.GetAddedBy() == "alice"
			if !gotMember {
				t.Errorf("memberAdded = %v", m)
				break
			}
		}
	}
	if !gotSender || !gotMember {
		t.Fatalf("the stream ended (%v) before pat's message and vic's new role", s.Err())
	}
	var sender string
	if err := tb.pool.QueryRow(ctx, `SELECT sender_id FROM convo.messages WHERE id = $1`, sent.UserMessageId).Scan(&sender); err != nil || sender != "pat" {
		t.Errorf("messages.sender_id = %q (%v), want pat", sender, err)
	}
	// vic is a participant now: vic may send.
	tb.send(t, users["vic"], f.conv, "now I write")
}

// TestMemberRemovedEndsStreams: removing a member ends that member's open
// streams of the conversation at once with NotFound, whichever server
// holds them (each follows the log through its own feed), and leaves the
// others' streams open; the removed member cannot open one again.
func TestMemberRemovedEndsStreams(t *testing.T) {
	t.Parallel()
	forEachFeed(t, func(t *testing.T, feed string) {
		ctx := context.Background()
		a := setup(t, setupOptions{verifier: auth.NewHS256(testSecret), feed: feed})
		// A second server on the same database: its own hub and feed.
		b := setup(t, setupOptions{dsn: a.dsn, verifier: auth.NewHS256(testSecret), feed: feed})
		users := a.users(t)
		f := a.shared(t, users, "")
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		open := func(c convov1connect.ConversationServiceClient) *connect.ServerStreamForClient[convov1.StreamConversationResponse] {
			s, err := c.StreamConversation(sctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: f.conv}))
			if err != nil {
				t.Fatal(err)
			}
			if !s.Receive() {
				t.Fatal(s.Err())
			}
			return s
		}
		patA, patB := open(users["pat"]), open(b.clientAs(tokenFor(t, "pat")))
		vicB := open(b.clientAs(tokenFor(t, "vic")))
		defer patA.Close()
		defer patB.Close()
		defer vicB.Close()

		if err := removeMember(users["alice"], f.conv, "pat"); err != nil {
			t.Fatal(err)
		}
		for name, s := range map[string]*connect.ServerStreamForClient[convov1.StreamConversationResponse]{"server A": patA, "server B": patB} {
			for s.Receive() {
				if s.Msg().GetEvent().GetMemberRemoved() != nil {
					t.Errorf("%s: pat received its own memberRemoved", name)
				}
			}
			if ce := requireCode(t, s.Err(), connect.CodeNotFound); !strings.Contains(ce.Message(), "removed") {
				t.Errorf("%s: pat's stream ended with %q", name, ce.Message())
			}
		}
		// vic, on server B, sees pat leave and goes on.
		for vicB.Receive() {
			if r := vicB.Msg().GetEvent().GetMemberRemoved(); r != nil {
				if r.GetUserId() != "pat" || r.GetRemovedBy() != "alice" {
					t.Errorf("memberRemoved = %v", r)
				}
				break
			}
		}
		if vicB.Err() != nil {
			t.Fatalf("vic's stream ended: %v", vicB.Err())
		}
		s, err := users["pat"].StreamConversation(sctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: f.conv}))
		if err == nil {
			s.Receive()
			err = s.Err()
			s.Close()
		}
		requireCode(t, err, connect.CodeNotFound)
	})
}

// TestMembersRefused: AddMember and RemoveMember refuse malformed user
// ids and roles, the owner's own id and a user who is no member, naming
// the field, and change nothing.
func TestMembersRefused(t *testing.T) {
	t.Parallel()
	tb := setupAuth(t)
	users := tb.users(t)
	f := tb.shared(t, users, "")
	alice := users["alice"]
	for name, tc := range map[string]struct {
		call func() error
		code connect.Code
		want string
	}{
		"EmptyUser":    {func() error { _, err := addMember(alice, f.conv, "", "viewer"); return err }, connect.CodeInvalidArgument, "userId: is required"},
		"LongUser":     {func() error { _, err := addMember(alice, f.conv, strings.Repeat("u", 201), "viewer"); return err }, connect.CodeInvalidArgument, "userId: must be at most 200 bytes"},
		"ControlUser":  {func() error { _, err := addMember(alice, f.conv, "bob\x1b", "viewer"); return err }, connect.CodeInvalidArgument, "userId: must not contain control characters"},
		"UnknownRole":  {func() error { _, err := addMember(alice, f.conv, "bob", "admin"); return err }, connect.CodeInvalidArgument, `role: must be "viewer" or "participant", got "admin"`},
		"OwnerRole":    {func() error { _, err := addMember(alice, f.conv, "bob", "owner"); return err }, connect.CodeInvalidArgument, "role:"},
		"NoRole":       {func() error { _, err := addMember(alice, f.conv, "bob", ""); return err }, connect.CodeInvalidArgument, "role: is required"},
		"AddOwner":     {func() error { _, err := addMember(alice, f.conv, "alice", "viewer"); return err }, connect.CodeInvalidArgument, "is the conversation's owner"},
		"RemoveOwner":  {func() error { return removeMember(alice, f.conv, "alice") }, connect.CodeInvalidArgument, "is the conversation's owner"},
		"RemoveNobody": {func() error { return removeMember(alice, f.conv, "nobody") }, connect.CodeNotFound, "is not a member"},
		"RemoveBadID":  {func() error { return removeMember(alice, f.conv, "a\nb") }, connect.CodeInvalidArgument, "userId: must not contain control characters"},
		"BadConv":      {func() error { _, err := addMember(alice, "42", "bob", "viewer"); return err }, connect.CodeInvalidArgument, "conversationId:"},
	} {
		before, rows := conversationOf(t, alice, f.conv), tb.countRows(t)
		ce := requireCode(t, tc.call(), tc.code)
		if !strings.Contains(ce.Message(), tc.want) {
			t.Errorf("%s: %q, want it to say %q", name, ce.Message(), tc.want)
		}
		if conversationOf(t, alice, f.conv) != before || tb.countRows(t) != rows {
			t.Errorf("%s: refused and changed something", name)
		}
	}
	// Adding a member with the role they have changes nothing, no event.
	before := conversationOf(t, alice, f.conv)
	if m, err := addMember(alice, f.conv, "vic", "viewer"); err != nil || m.GetRole() != "viewer" {
		t.Fatalf("add vic again: %v, %v", m, err)
	}
	if conversationOf(t, alice, f.conv) != before {
		t.Error("adding a member with their role changed the conversation (an event)")
	}
	// ListMembers: the owner first, then the members as added.
	res, err := users["vic"].ListMembers(context.Background(), connect.NewRequest(&convov1.ListMembersRequest{ConversationId: f.conv}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range res.Msg.Members {
		got = append(got, m.GetUserId()+":"+m.GetRole())
	}
	if strings.Join(got, " ") != "alice:owner pat:participant vic:viewer" && strings.Join(got, " ") != "alice:owner vic:viewer pat:participant" {
		t.Errorf("members = %v", got)
	}
	if got[0] != "alice:owner" {
		t.Errorf("the owner is not first: %v", got)
	}
	// vic leaves.
	if err := removeMember(users["vic"], f.conv, "vic"); err != nil {
		t.Fatal(err)
	}
	_, err = users["vic"].GetConversation(context.Background(), connect.NewRequest(&convov1.GetConversationRequest{ConversationId: f.conv}))
	requireCode(t, err, connect.CodeNotFound)
}

// TestMembersSearch: SearchMessages around a shared conversation, as
// its owner (alice), a participant (pat), a viewer (vic), a removed
// member (rex), a stranger (sam), and a live share link's token sent as a
// bearer token. The conversation holds alice's message with alice's text
// file, pat's with pat's, and rex's with rex's (sent while a participant,
// before rex was removed); rex and sam each have a conversation of their
// own with the same words.
//
//   - Text: the owner and every member find the conversation's messages;
//     a removed member and a stranger find only their own conversation.
//   - Text files: a file's text is found by its uploader alone, and only
//     while the uploader may read the conversation: alice's file by alice,
//     pat's by pat (not by the owner, nor another member), rex's by nobody.
//   - The share token is Unauthenticated, and nothing changes.
func TestMembersSearch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t, setupOptions{verifier: auth.NewHS256(testSecret), files: true})
	users := tb.users(t)
	f := tb.shared(t, users, "")
	sendFile := func(u, text, name, content string) {
		t.Helper()
		file := tb.upload(t, u, name, "text/plain", []byte(content))
		if _, err := users[u].SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{
			ConversationId: f.conv, Text: text, FileIds: []string{file.ID.String()},
		})); err != nil {
			t.Fatalf("%s sends %s: %v", u, name, err)
		}
	}
	sendFile("alice", "alice's wombat message", "alice.txt", "notes on the okapi")
	sendFile("pat", "pat's wombat message", "pat.txt", "notes on the quokka")
	if _, err := addMember(users["alice"], f.conv, "rex", "participant"); err != nil {
		t.Fatal(err)
	}
	sendFile("rex", "rex's wombat message", "rex.txt", "notes on the numbat")
	if err := removeMember(users["alice"], f.conv, "rex"); err != nil {
		t.Fatal(err)
	}
	own := map[string]string{}
	for _, u := range []string{"rex", "sam"} {
		own[u] = tb.send(t, users[u], "", u+"'s own zebra and wombat").ConversationId
	}

	// What each user's search for a word finds: the conversations of the
	// results, "shared" for f.conv.
	want := map[string]map[string][]string{
		"zebra":  {"alice": {"shared"}, "pat": {"shared"}, "vic": {"shared"}, "rex": {"own"}, "sam": {"own"}},
		"wombat": {"alice": {"shared", "shared", "shared"}, "pat": {"shared", "shared", "shared"}, "vic": {"shared", "shared", "shared"}, "rex": {"own"}, "sam": {"own"}},
		"okapi":  {"alice": {"shared"}},
		"quokka": {"pat": {"shared"}},
		"numbat": {},
	}
	for query, byUser := range want {
		for _, u := range memberRoles {
			res, err := users[u].SearchMessages(ctx, connect.NewRequest(&convov1.SearchMessagesRequest{Query: query}))
			if err != nil {
				t.Fatalf("%s searches %q: %v", u, query, err)
			}
			var got []string
			for _, r := range res.Msg.Results {
				switch r.GetConversationId() {
				case f.conv:
					got = append(got, "shared")
				case own[u]:
					got = append(got, "own")
				default:
					got = append(got, r.GetConversationId())
				}
			}
			if !slices.Equal(got, byUser[u]) {
				t.Errorf("%s's search for %q found %v, want %v", u, query, got, byUser[u])
			}
		}
	}

	made, err := createShare(users["alice"], &convov1.CreateShareRequest{ConversationId: f.conv, Mode: "live"})
	if err != nil {
		t.Fatal(err)
	}
	before := tb.countRows(t)
	_, err = tb.clientAs(made.Token).SearchMessages(ctx, connect.NewRequest(&convov1.SearchMessagesRequest{Query: "zebra"}))
	requireCode(t, err, connect.CodeUnauthenticated)
	if after := tb.countRows(t); after != before {
		t.Errorf("a search with the share token changed the database: %s -> %s", before, after)
	}
}

// TestMembersTakeBackQueued: a participant takes back the queued messages
// they sent, not another member's (PermissionDenied); the owner takes back
// anyone's; a viewer none; a stranger is told the message does not exist.
// Every refusal changes nothing.
func TestMembersTakeBackQueued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setupAuth(t)
	users := tb.users(t)
	f := tb.shared(t, users, "")
	// No worker runs: the first reply stays queued, so the sends after it
	// wait for their turn.
	send := func(u, text string) *convov1.SendMessageResponse {
		t.Helper()
		res, err := users[u].SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: f.conv, Text: text}))
		if err != nil {
			t.Fatalf("%s sends: %v", u, err)
		}
		return res.Msg
	}
	send("alice", "first")
	pats, alices := send("pat", "pat's"), send("alice", "alice's")
	if !pats.Queued || !alices.Queued {
		t.Fatalf("queued: pat's %v, alice's %v; want both queued behind the first reply", pats.Queued, alices.Queued)
	}
	takeBack := func(u, message string) error {
		_, err := users[u].DeleteQueuedMessage(ctx, connect.NewRequest(&convov1.DeleteQueuedMessageRequest{MessageId: message}))
		return err
	}
	for _, c := range []struct {
		user, message, says string
		code                connect.Code
	}{
		{"vic", pats.UserMessageId, "a viewer may not", connect.CodePermissionDenied},
		{"pat", alices.UserMessageId, "sent by another member", connect.CodePermissionDenied},
		{"rex", pats.UserMessageId, "does not exist", connect.CodeNotFound},
		{"sam", pats.UserMessageId, "does not exist", connect.CodeNotFound},
	} {
		before, rows := conversationOf(t, users["alice"], f.conv), tb.countRows(t)
		ce := requireCode(t, takeBack(c.user, c.message), c.code)
		if ce != nil && !strings.Contains(ce.Message(), c.says) {
			t.Errorf("%s takes back %s: %q, want it to say %q", c.user, c.message, ce.Message(), c.says)
		}
		if after, afterRows := conversationOf(t, users["alice"], f.conv), tb.countRows(t); after != before || afterRows != rows {
			t.Errorf("%s's refused take-back changed something:\nrows before %s\nrows after  %s", c.user, rows, afterRows)
		}
	}
	if err := takeBack("pat", pats.UserMessageId); err != nil {
		t.Errorf("pat takes back pat's own: %v", err)
	}
	if err := takeBack("alice", alices.UserMessageId); err != nil {
		t.Errorf("alice (the owner) takes back her own: %v", err)
	}
}
