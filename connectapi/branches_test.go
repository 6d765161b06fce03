package connectapi_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// resumeUntil follows a subscriber as a client does: on a resumable end
// (Unavailable) it subscribes again after the last seq it applied, until
// it has applied seq. It returns the subscriber it ended with and how
// many times it resumed.
func (tb *testBundle) resumeUntil(t testing.TB, sub *subscriber, req *convov1.StreamConversationRequest, seq int64) (*subscriber, int) {
	t.Helper()
	resumes := 0
	deadline := time.After(streamTimeout)
	for {
		sub.mu.Lock()
		st, err := sub.state.clone(), sub.err
		sub.mu.Unlock()
		if st.seq >= seq && err == nil {
			return sub, resumes
		}
		if err != nil {
			if connect.CodeOf(err) != connect.CodeUnavailable {
				t.Fatalf("stream failed at seq %d: %v", st.seq, err)
			}
			sub.close()
			again := proto.Clone(req).(*convov1.StreamConversationRequest)
			again.AfterSeq = proto.Int64(st.seq)
			sub = subscribeFrom(t, tb.client, again, st)
			resumes++
			continue
		}
		select {
		case <-sub.changed:
		case <-sub.done:
		case <-deadline:
			t.Fatalf("stream reached seq %d of %d in %v", st.seq, seq, streamTimeout)
		}
	}
}

// TestBranchesFold: a conversation goes through a regeneration, an edit
// (whose reply a subscriber joins mid-stream) and two switches; every
// subscriber, whenever it joined, folds to GetConversation (the active
// path), on both feeds. Those that asked include_branches follow each
// change live; the others end before each branchSwitched, resume after
// their last seq and get a snapshot of the new path, and never receive a
// branchSwitched.
func TestBranchesFold(t *testing.T) {
	t.Parallel()
	forEachFeed(t, func(t *testing.T, feed string) {
		ctx := context.Background()
		tb := setup(t, setupOptions{feed: feed})
		one := tb.send(t, tb.client, "", "one")
		conv := one.ConversationId
		tb.writeReply(t, one.PromptId, "re: one")
		two := tb.send(t, tb.client, conv, "two")
		tb.writeReply(t, two.PromptId, "re: two")

		type follower struct {
			sub *subscriber
			req *convov1.StreamConversationRequest
		}
		var followers []*follower
		legacyResumes := 0
		join := func() {
			for _, branches := range []bool{true, false} {
				req := &convov1.StreamConversationRequest{ConversationId: conv, IncludeBranches: branches}
				followers = append(followers, &follower{sub: subscribe(t, tb.client, req), req: req})
			}
		}
		check := func(what string) {
			t.Helper()
			seq := tb.mark(t, conv)
			want, err := tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: conv}))
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range followers {
				var resumes int
				f.sub, resumes = tb.resumeUntil(t, f.sub, f.req, seq)
				if !f.req.IncludeBranches {
					legacyResumes += resumes
				}
				if f.req.IncludeBranches && resumes > 0 {
					t.Errorf("%s: follower %d asked for branches and still had to resume %d times", what, i, resumes)
				}
				f.sub.mu.Lock()
				st := f.sub.state.clone()
				f.sub.mu.Unlock()
				if !st.equal(want.Msg) {
					t.Errorf("%s: follower %d (branches %v) differs from GetConversation: %s", what, i, f.req.IncludeBranches, st.diff(want.Msg))
				}
			}
		}
		join()

		re, err := tb.client.RegenerateReply(ctx, connect.NewRequest(&convov1.RegenerateReplyRequest{ConversationId: conv}))
		if err != nil {
			t.Fatal(err)
		}
		join()
		tb.writeReply(t, re.Msg.PromptId, "two again")
		check("after regenerate")
		join()

		ed, err := tb.client.EditMessage(ctx, connect.NewRequest(&convov1.EditMessageRequest{
			ConversationId: conv, MessageId: one.UserMessageId, Text: "uno",
		}))
		if err != nil {
			t.Fatal(err)
		}
		// Its reply streams while a subscriber joins.
		prompt := uuid.MustParse(ed.Msg.PromptId)
		if err := tb.api.PromptStart(ctx, prompt); err != nil {
			t.Fatal(err)
		}
		block, err := tb.api.BlockStart(ctx, apiq.BlockStartParams{PromptID: prompt, BlockType: "text", Metadata: []byte("{}")})
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: block, Delta: "re: "}); err != nil {
			t.Fatal(err)
		}
		join()
		if err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: block, Delta: "uno"}); err != nil {
			t.Fatal(err)
		}
		if err := tb.api.PromptComplete(ctx, prompt); err != nil {
			t.Fatal(err)
		}
		check("after edit")

		sw, err := tb.client.SwitchBranch(ctx, connect.NewRequest(&convov1.SwitchBranchRequest{ConversationId: conv, MessageId: one.UserMessageId}))
		if err != nil {
			t.Fatal(err)
		}
		if sw.Msg.LeafMessageId != re.Msg.AssistantMessageId {
			t.Errorf("switch back to the first version: leaf %s; want its newest reply %s", sw.Msg.LeafMessageId, re.Msg.AssistantMessageId)
		}
		join()
		if _, err := tb.client.SwitchBranch(ctx, connect.NewRequest(&convov1.SwitchBranchRequest{ConversationId: conv, MessageId: two.AssistantMessageId})); err != nil {
			t.Fatal(err)
		}
		check("after switches")
		join()
		check("at the end")

		got, err := tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: conv}))
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, m := range got.Msg.Messages {
			texts = append(texts, m.Blocks[0].Content)
		}
		if want := []string{"one", "re: one", "two", "re: two"}; !slices.Equal(texts, want) {
			t.Errorf("the active path is %v; want %v", texts, want)
		}
		if m := got.Msg.Messages[0]; m.SiblingCount != 2 || m.SiblingIndex != 0 {
			t.Errorf("the first message is version %d of %d; want 1 of 2", m.SiblingIndex+1, m.SiblingCount)
		}
		if m := got.Msg.Messages[3]; m.SiblingCount != 2 || m.SiblingIndex != 0 || m.ParentId != two.UserMessageId {
			t.Errorf("the last reply: version %d of %d below %s; want 1 of 2 below %s", m.SiblingIndex+1, m.SiblingCount, m.ParentId, two.UserMessageId)
		}
		if legacyResumes == 0 {
			t.Error("no follower that did not ask for branches ever resumed: the changes did not reach them")
		}
		switched := 0
		for i, f := range followers {
			f.sub.mu.Lock()
			for _, r := range f.sub.received {
				if r.GetEvent().GetBranchSwitched() == nil {
					continue
				}
				switched++
				if !f.req.IncludeBranches {
					t.Errorf("follower %d did not ask for branches and received %v", i, r)
				}
			}
			f.sub.mu.Unlock()
		}
		if switched == 0 {
			t.Error("no follower that asked for branches received a branchSwitched")
		}
	})
}

// TestBranchRPCsRefuse: bad input is refused with a clear code naming
// the field, and changes nothing.
func TestBranchRPCsRefuse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	one := tb.send(t, tb.client, "", "one")
	tb.writeReply(t, one.PromptId, "re: one")
	other := tb.send(t, tb.client, "", "streaming elsewhere")
	cases := []struct {
		name string
		call func() error
		code connect.Code
		says string
	}{
		{"edit without a message id", func() error {
			_, err := tb.client.EditMessage(ctx, connect.NewRequest(&convov1.EditMessageRequest{ConversationId: one.ConversationId, Text: "x"}))
			return err
		}, connect.CodeInvalidArgument, "messageId"},
		{"edit with a malformed conversation id", func() error {
			_, err := tb.client.EditMessage(ctx, connect.NewRequest(&convov1.EditMessageRequest{ConversationId: "nope", MessageId: one.UserMessageId, Text: "x"}))
			return err
		}, connect.CodeInvalidArgument, "conversationId"},
		{"edit to empty text", func() error {
			_, err := tb.client.EditMessage(ctx, connect.NewRequest(&convov1.EditMessageRequest{ConversationId: one.ConversationId, MessageId: one.UserMessageId, Text: "  "}))
			return err
		}, connect.CodeInvalidArgument, "text"},
		{"edit a reply", func() error {
			_, err := tb.client.EditMessage(ctx, connect.NewRequest(&convov1.EditMessageRequest{ConversationId: one.ConversationId, MessageId: one.AssistantMessageId, Text: "x"}))
			return err
		}, connect.CodeFailedPrecondition, "only the user's messages can be edited"},
		{"edit with a bad model", func() error {
			_, err := tb.client.EditMessage(ctx, connect.NewRequest(&convov1.EditMessageRequest{ConversationId: one.ConversationId, MessageId: one.UserMessageId, Text: "x",
				Model: &convov1.ModelConfig{Temperature: proto.Float64(9)}}))
			return err
		}, connect.CodeInvalidArgument, "model.temperature"},
		{"regenerate with a malformed message id", func() error {
			_, err := tb.client.RegenerateReply(ctx, connect.NewRequest(&convov1.RegenerateReplyRequest{ConversationId: one.ConversationId, MessageId: "x"}))
			return err
		}, connect.CodeInvalidArgument, "messageId"},
		{"regenerate while a reply streams", func() error {
			_, err := tb.client.RegenerateReply(ctx, connect.NewRequest(&convov1.RegenerateReplyRequest{ConversationId: other.ConversationId}))
			return err
		}, connect.CodeFailedPrecondition, other.PromptId},
		{"switch to a message of another conversation", func() error {
			_, err := tb.client.SwitchBranch(ctx, connect.NewRequest(&convov1.SwitchBranchRequest{ConversationId: one.ConversationId, MessageId: other.UserMessageId}))
			return err
		}, connect.CodeNotFound, "is not a message of conversation"},
		{"switch to a version past the turn's", func() error {
			_, err := tb.client.SwitchBranch(ctx, connect.NewRequest(&convov1.SwitchBranchRequest{ConversationId: one.ConversationId, MessageId: one.UserMessageId, SiblingIndex: proto.Int32(1)}))
			return err
		}, connect.CodeInvalidArgument, "siblingIndex 1 is out of range"},
		{"switch to a negative version", func() error {
			_, err := tb.client.SwitchBranch(ctx, connect.NewRequest(&convov1.SwitchBranchRequest{ConversationId: one.ConversationId, MessageId: one.UserMessageId, SiblingIndex: proto.Int32(-1)}))
			return err
		}, connect.CodeInvalidArgument, "siblingIndex: must not be negative"},
		{"switch without a message id", func() error {
			_, err := tb.client.SwitchBranch(ctx, connect.NewRequest(&convov1.SwitchBranchRequest{ConversationId: one.ConversationId}))
			return err
		}, connect.CodeInvalidArgument, "messageId"},
	}
	for _, c := range cases {
		before := tb.countRows(t)
		err := c.call()
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != c.code || !strings.Contains(ce.Message(), c.says) {
			t.Errorf("%s: %v; want %v saying %q", c.name, err, c.code, c.says)
		}
		if after := tb.countRows(t); after != before {
			t.Errorf("%s changed something: %s → %s", c.name, before, after)
		}
	}
	// Another owner's conversation looks like none.
	tbAuth := setupAuth(t)
	mine := tbAuth.send(t, tbAuth.clientAs(tokenFor(t, "alice")), "", "mine")
	_, err := tbAuth.clientAs(tokenFor(t, "bob")).SwitchBranch(ctx, connect.NewRequest(&convov1.SwitchBranchRequest{
		ConversationId: mine.ConversationId, MessageId: mine.UserMessageId,
	}))
	requireCode(t, err, connect.CodeNotFound)
}

// TestSwitchBranchBySiblingIndex: SwitchBranch with sibling_index shows
// that version of the named message's turn, as a client's "‹ n / m ›"
// asks: back to version 1 of an edited message, then forward to 2.
func TestSwitchBranchBySiblingIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	one := tb.send(t, tb.client, "", "one")
	conv := one.ConversationId
	tb.writeReply(t, one.PromptId, "re: one")
	ed, err := tb.client.EditMessage(ctx, connect.NewRequest(&convov1.EditMessageRequest{ConversationId: conv, MessageId: one.UserMessageId, Text: "uno"}))
	if err != nil {
		t.Fatal(err)
	}
	tb.writeReply(t, ed.Msg.PromptId, "re: uno")
	for _, step := range []struct {
		from  string
		index int32
		leaf  string
		first string
	}{
		{ed.Msg.UserMessageId, 0, one.AssistantMessageId, "one"},
		{one.UserMessageId, 1, ed.Msg.AssistantMessageId, "uno"},
	} {
		sw, err := tb.client.SwitchBranch(ctx, connect.NewRequest(&convov1.SwitchBranchRequest{
			ConversationId: conv, MessageId: step.from, SiblingIndex: proto.Int32(step.index),
		}))
		if err != nil {
			t.Fatal(err)
		}
		if sw.Msg.LeafMessageId != step.leaf {
			t.Errorf("version %d: leaf %s; want %s", step.index+1, sw.Msg.LeafMessageId, step.leaf)
		}
		got := tb.state(t, conv)
		if m := got.Messages[0]; m.Blocks[0].Content != step.first || m.SiblingIndex != step.index || m.SiblingCount != 2 {
			t.Errorf("version %d: the first message is %q, version %d of %d", step.index+1, m.Blocks[0].Content, m.SiblingIndex+1, m.SiblingCount)
		}
	}
}

// TestLargeSwitchFold: a switch to a branch larger than a snapshot
// reaches followers as a bounded branchSwitched (the latest messages and
// the token of the rest), on both feeds; each follower, whenever it
// joined, then pages in the older messages and folds to GetConversation.
// Without the bound the event would carry the whole branch.
func TestLargeSwitchFold(t *testing.T) {
	t.Parallel()
	forEachFeed(t, func(t *testing.T, feed string) {
		ctx := context.Background()
		tb := setup(t, setupOptions{feed: feed, snapshotBytes: 8192})
		one := tb.send(t, tb.client, "", "one")
		conv := one.ConversationId
		tb.writeReply(t, one.PromptId, "re: one")
		two := tb.send(t, tb.client, conv, "two")
		tb.writeReply(t, two.PromptId, "re: two")
		// 30 KB more on this branch.
		for i := range 10 {
			s := tb.send(t, tb.client, conv, "more "+strconv.Itoa(i))
			tb.writeReply(t, s.PromptId, strings.Repeat("a long reply ", 230))
		}
		ed, err := tb.client.EditMessage(ctx, connect.NewRequest(&convov1.EditMessageRequest{
			ConversationId: conv, MessageId: two.UserMessageId, Text: "deux",
		}))
		if err != nil {
			t.Fatal(err)
		}
		tb.writeReply(t, ed.Msg.PromptId, "re: deux")

		req := &convov1.StreamConversationRequest{ConversationId: conv, IncludeBranches: true}
		early := subscribe(t, tb.client, req)
		early.waitSeq(t, tb.mark(t, conv), streamTimeout)
		if _, err := tb.client.SwitchBranch(ctx, connect.NewRequest(&convov1.SwitchBranchRequest{
			ConversationId: conv, MessageId: two.AssistantMessageId,
		})); err != nil {
			t.Fatal(err)
		}
		late := subscribe(t, tb.client, req)
		seq := tb.mark(t, conv)
		want := wholeConversation(t, tb.client, &convov1.GetConversationRequest{ConversationId: conv})
		for name, sub := range map[string]*subscriber{"a follower from before the switch": early, "one that joined after": late} {
			st := sub.waitSeq(t, seq, streamTimeout)
			if st.older == "" {
				t.Errorf("%s holds all %d messages: want the latest that fit 8192 bytes and a token", name, len(st.messages))
			}
			if err := st.loadOlder(ctx, tb.client); err != nil {
				t.Fatal(err)
			}
			if !st.equal(want) {
				t.Errorf("%s, with its older pages, differs from GetConversation: %s", name, st.diff(want))
			}
		}
		early.mu.Lock()
		defer early.mu.Unlock()
		for _, r := range early.received {
			if s := r.GetEvent().GetBranchSwitched(); s != nil && s.OlderPageToken != "" {
				if size := proto.Size(s); size > 2*8192 {
					t.Errorf("the bounded branchSwitched is %d bytes; want about 8192", size)
				}
				return
			}
		}
		t.Error("the follower from before the switch received no bounded branchSwitched")
	})
}

// TestSwitchForkBeforeWindowFold: a switch whose fork is older than a
// follower's window, to a branch made before the window's messages,
// comes as an event with every message after the fork and no token; the
// follower's older pages (the old window's token) then hold, before that
// window, messages the event brought. A fold that skips them, as
// @convo/client's does, ends equal to GetConversation, on both feeds.
func TestSwitchForkBeforeWindowFold(t *testing.T) {
	t.Parallel()
	forEachFeed(t, func(t *testing.T, feed string) {
		ctx := context.Background()
		tb := setup(t, setupOptions{feed: feed, snapshotBytes: 8192})
		one := tb.send(t, tb.client, "", "one")
		conv := one.ConversationId
		tb.writeReply(t, one.PromptId, "re: one")
		two := tb.send(t, tb.client, conv, "two")
		tb.writeReply(t, two.PromptId, "re: two")
		ed, err := tb.client.EditMessage(ctx, connect.NewRequest(&convov1.EditMessageRequest{
			ConversationId: conv, MessageId: two.UserMessageId, Text: "deux",
		}))
		if err != nil {
			t.Fatal(err)
		}
		tb.writeReply(t, ed.Msg.PromptId, "re: deux")
		// Back to "two", and 30 KB more on it: the window of a snapshot
		// now starts after the branch of "deux" was made.
		if _, err := tb.client.SwitchBranch(ctx, connect.NewRequest(&convov1.SwitchBranchRequest{
			ConversationId: conv, MessageId: two.UserMessageId,
		})); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			s := tb.send(t, tb.client, conv, "more "+strconv.Itoa(i))
			tb.writeReply(t, s.PromptId, strings.Repeat("a long reply ", 230))
		}
		req := &convov1.StreamConversationRequest{ConversationId: conv, IncludeBranches: true}
		sub := subscribe(t, tb.client, req)
		if st := sub.waitSeq(t, tb.mark(t, conv), streamTimeout); st.older == "" || slices.ContainsFunc(st.messages, func(m *convov1.Message) bool { return m.Id == one.AssistantMessageId }) {
			t.Fatalf("the snapshot holds %d messages, token %q: want a window after the fork", len(st.messages), st.older)
		}

		if _, err := tb.client.SwitchBranch(ctx, connect.NewRequest(&convov1.SwitchBranchRequest{
			ConversationId: conv, MessageId: ed.Msg.UserMessageId,
		})); err != nil {
			t.Fatal(err)
		}
		seq := tb.mark(t, conv)
		want := tb.state(t, conv)
		st := sub.waitSeq(t, seq, streamTimeout)
		if err := st.loadOlder(ctx, tb.client); err != nil {
			t.Fatal(err)
		}
		if !st.equal(want) {
			t.Errorf("the follower, with its older pages, differs from GetConversation: %s", st.diff(want))
		}
		sub.mu.Lock()
		defer sub.mu.Unlock()
		var last *convov1.BranchSwitched
		for _, r := range sub.received {
			if b := r.GetEvent().GetBranchSwitched(); b != nil {
				last = b
			}
		}
		if last == nil || last.ForkMessageId != one.AssistantMessageId || last.OlderPageToken != "" || len(last.Messages) != 2 {
			t.Errorf("the switch's event: %v; want fork %s, the 2 messages of \"deux\", no token", last, one.AssistantMessageId)
		}
	})
}
