package postgres_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/postgres/dbq"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

// answerWith has worker w1 claim the queued prompt, write text as one
// text block and complete it.
func (tb *testBundle) answerWith(t testing.TB, promptID uuid.UUID, text string) {
	t.Helper()
	tb.answerAll(t, map[uuid.UUID]string{promptID: text})
}

// answerAll answers each queued prompt of texts (in the order claimed)
// with its text.
func (tb *testBundle) answerAll(t testing.TB, texts map[uuid.UUID]string) {
	t.Helper()
	for range texts {
		claimed, err := tb.api.PromptClaim(context.Background(), apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v %+v", err, claimed)
		}
		text, ok := texts[claimed[0].PromptID]
		if !ok {
			t.Fatalf("claimed prompt %s; want one of %v", claimed[0].PromptID, texts)
		}
		tb.complete(t, claimed[0].PromptID, text)
	}
}

// complete starts the claimed prompt, writes text as one text block and
// completes it.
func (tb *testBundle) complete(t testing.TB, promptID uuid.UUID, text string) {
	t.Helper()
	ctx := context.Background()
	if err := tb.api.PromptStart(ctx, promptID); err != nil {
		t.Fatal(err)
	}
	block := tb.startBlock(t, promptID, "text")
	tb.append(t, block, text)
	if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: block}); err != nil {
		t.Fatal(err)
	}
	if err := tb.api.PromptComplete(ctx, promptID); err != nil {
		t.Fatal(err)
	}
}

// turn sends text to the conversation (uuid.Nil: a new one) and answers it
// with "re: "+text.
func (tb *testBundle) turn(t testing.TB, conversationID uuid.UUID, text string) (userID uuid.UUID, r reply) {
	t.Helper()
	res, err := tb.store.SendMessage(context.Background(), conversation.SendMessageParams{
		OwnerID: "local", ConversationID: conversationID, Text: text,
		ModelConfigs: []json.RawMessage{json.RawMessage(`{"model":"demo"}`)},
	})
	if err != nil {
		t.Fatalf("send message: %v", err)
	}
	tb.answerWith(t, res.PromptIDs[0], "re: "+text)
	return res.UserMessageID, reply{conversationID: res.ConversationID, messageID: res.AssistantMessageIDs[0], promptID: res.PromptIDs[0]}
}

// pathText is the conversation's active path as its messages' texts, with
// "‹i/n›" after a message that has siblings.
func pathText(st conversation.State) string {
	var out []string
	for _, m := range st.Messages {
		var text strings.Builder
		for _, b := range m.Blocks {
			text.WriteString(b.Content)
		}
		s := text.String()
		if s == "" {
			s = "(" + string(m.Status) + ")"
		}
		if m.SiblingCount > 1 {
			s += " ‹" + strconv.Itoa(m.SiblingIndex+1) + "/" + strconv.Itoa(m.SiblingCount) + "›"
		}
		out = append(out, s)
	}
	return strings.Join(out, " | ")
}

// contextText is what the model answering promptID is shown
// (convo.prompt_context), as texts in order.
func (tb *testBundle) contextText(t testing.TB, promptID uuid.UUID) string {
	t.Helper()
	rows, err := tb.api.WorkerContextList(context.Background(), promptID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Content)
	}
	return strings.Join(out, " | ")
}

// pathMarks summarises the tree (parents and the active path) for
// "nothing changed" checks, with the fingerprint.
func (tb *testBundle) treeFingerprint(t testing.TB) string {
	t.Helper()
	var fp string
	if err := tb.pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(id::text || coalesce(parent_id::text, '-') || on_active_path, ',' ORDER BY id), '')
		FROM convo.messages`).Scan(&fp); err != nil {
		t.Fatal(err)
	}
	return tb.fingerprint(t) + "|" + fp
}

// TestEditRegenerateSwitch walks a conversation through an edit, a
// regeneration and switches, checking the active path (with the sibling
// counts), the events, and what each reply's model was shown.
func TestEditRegenerateSwitch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	u1, a1 := tb.turn(t, uuid.Nil, "one")
	conv := a1.conversationID
	_, a2 := tb.turn(t, conv, "two")
	if got, want := pathText(tb.state(t, conv)), "one | re: one | two | re: two"; got != want {
		t.Fatalf("path = %q; want %q", got, want)
	}

	// Regenerate the latest reply: a sibling, the old one kept.
	before := len(tb.events(t, conv))
	re, err := tb.store.RegenerateReply(ctx, conversation.RegenerateParams{OwnerID: "local", ConversationID: conv})
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(tb.events(t, conv)[before:]); !slices.Equal(got, []string{"branchSwitched", "promptQueued", "conversationUpdated"}) {
		t.Errorf("regenerate wrote %v", got)
	}
	if got, want := pathText(tb.state(t, conv)), "one | re: one | two | (pending) ‹2/2›"; got != want {
		t.Errorf("after regenerate, path = %q; want %q", got, want)
	}
	tb.answerWith(t, re.PromptID, "encore two")
	if got, want := tb.contextText(t, re.PromptID), "one | re: one | two"; got != want {
		t.Errorf("the regenerated reply's model saw %q; want %q", got, want)
	}

	// Edit the first message: a new first message and its reply.
	before = len(tb.events(t, conv))
	ed, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: u1, Text: "uno"})
	if err != nil {
		t.Fatal(err)
	}
	events := tb.events(t, conv)[before:]
	// The title follows the first message (TestTitleFollowsFirstMessage).
	if got := kinds(events); !slices.Equal(got, []string{"branchSwitched", "conversationUpdated", "promptQueued", "conversationUpdated"}) {
		t.Errorf("edit wrote %v", got)
	}
	var switched struct {
		ForkMessageID string            `json:"forkMessageId"`
		LeafMessageID string            `json:"leafMessageId"`
		Messages      []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(events[0].Payload, &switched); err != nil {
		t.Fatal(err)
	}
	if switched.ForkMessageID != "" || switched.LeafMessageID != ed.AssistantMessageID.String() || len(switched.Messages) != 2 {
		t.Errorf("edit's branchSwitched = %s; want no fork, leaf %s, two messages", events[0].Payload, ed.AssistantMessageID)
	}
	if got, want := pathText(tb.state(t, conv)), "uno ‹2/2› | (pending)"; got != want {
		t.Errorf("after edit, path = %q; want %q", got, want)
	}
	tb.answerWith(t, ed.PromptID, "re: uno")
	if got := tb.contextText(t, ed.PromptID); got != "uno" {
		t.Errorf("the edited message's reply's model saw %q; want only the edited message", got)
	}

	// Switch back to the first version: its newest leaf, the regenerated reply.
	leaf, err := tb.store.SwitchBranch(ctx, "local", conv, u1)
	if err != nil {
		t.Fatal(err)
	}
	if leaf != re.MessageID {
		t.Errorf("switch to %s: leaf %s; want the newest below it, %s", u1, leaf, re.MessageID)
	}
	if got, want := pathText(tb.state(t, conv)), "one ‹1/2› | re: one | two | encore two ‹2/2›"; got != want {
		t.Errorf("after switch, path = %q; want %q", got, want)
	}
	// And to the first reply of "two".
	if leaf, err = tb.store.SwitchBranch(ctx, "local", conv, a2.messageID); err != nil || leaf != a2.messageID {
		t.Fatalf("switch to %s = %s, %v", a2.messageID, leaf, err)
	}
	if got, want := pathText(tb.state(t, conv)), "one ‹1/2› | re: one | two | re: two ‹1/2›"; got != want {
		t.Errorf("after the second switch, path = %q; want %q", got, want)
	}
	// Switching to what is shown changes nothing and writes nothing.
	fp := tb.treeFingerprint(t)
	if leaf, err = tb.store.SwitchBranch(ctx, "local", conv, a2.messageID); err != nil || leaf != a2.messageID {
		t.Fatalf("switch to the shown branch = %s, %v", leaf, err)
	}
	if tb.treeFingerprint(t) != fp {
		t.Error("switching to the branch shown changed something")
	}

	// The next message hangs below the active leaf; its model sees the path.
	_, a3 := tb.turn(t, conv, "three")
	if got, want := tb.contextText(t, a3.promptID), "one | re: one | two | re: two | three"; got != want {
		t.Errorf("the next reply's model saw %q; want %q", got, want)
	}

	// Search still finds the versions off the path.
	for q, want := range map[string]int{"uno": 2, "encore": 1} {
		if res := tb.search(t, "local", q); len(res) != want {
			t.Errorf("search %q found %d messages; want the %d off the path", q, len(res), want)
		}
	}
}

// TestBranchRefusals: each bad request is refused with its code, and
// changes nothing.
func TestBranchRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	u1, a1 := tb.turn(t, uuid.Nil, "one")
	conv := a1.conversationID
	_, other := tb.turn(t, uuid.Nil, "elsewhere")
	if _, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: "mallory", Text: "hers", ModelConfigs: []json.RawMessage{json.RawMessage(`{}`)},
	}); err != nil {
		t.Fatal(err)
	}
	streaming := tb.sendMessage(t, other.conversationID, "streams")

	cases := []struct {
		name string
		call func() error
		code conversation.Code
		says string
	}{
		{"edit an assistant message", func() error {
			_, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: a1.messageID, Text: "x"})
			return err
		}, conversation.FailedPrecondition, "only the user's messages can be edited"},
		{"edit a message of another conversation", func() error {
			_, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: other.messageID, Text: "x"})
			return err
		}, conversation.NotFound, "is not a message of conversation"},
		{"edit in another owner's conversation", func() error {
			_, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "mallory", ConversationID: conv, MessageID: u1, Text: "x"})
			return err
		}, conversation.NotFound, "does not exist"},
		{"edit to empty text", func() error {
			_, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: u1, Text: " \u200b"})
			return err
		}, conversation.Invalid, "text must not be empty"},
		{"edit a reply while it streams", func() error {
			_, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: other.conversationID, MessageID: streaming.messageID, Text: "x"})
			return err
		}, conversation.FailedPrecondition, "only the user's messages"},
		{"regenerate a user message", func() error {
			_, err := tb.store.RegenerateReply(ctx, conversation.RegenerateParams{OwnerID: "local", ConversationID: conv, MessageID: uuid.NullUUID{UUID: u1, Valid: true}})
			return err
		}, conversation.FailedPrecondition, "only replies are regenerated"},
		{"regenerate while a reply streams", func() error {
			_, err := tb.store.RegenerateReply(ctx, conversation.RegenerateParams{OwnerID: "local", ConversationID: other.conversationID})
			return err
		}, conversation.FailedPrecondition, "is still being written"},
		{"switch to a message of another conversation", func() error {
			_, err := tb.store.SwitchBranch(ctx, "local", conv, other.messageID)
			return err
		}, conversation.NotFound, "is not a message of conversation"},
		{"switch in another owner's conversation", func() error {
			_, err := tb.store.SwitchBranch(ctx, "mallory", conv, u1)
			return err
		}, conversation.NotFound, "does not exist"},
		{"switch while a reply streams", func() error {
			_, err := tb.store.SwitchBranch(ctx, "local", other.conversationID, other.messageID)
			return err
		}, conversation.FailedPrecondition, "is still being written"},
	}
	for _, c := range cases {
		fp := tb.treeFingerprint(t)
		err := c.call()
		if conversation.ErrorCode(err) != c.code || err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want %s saying %q", c.name, err, c.code, c.says)
		}
		if tb.treeFingerprint(t) != fp {
			t.Errorf("%s changed something", c.name)
		}
	}

	// Editing the user's message while its reply streams: refused too.
	var streamingUser uuid.UUID
	if err := tb.pool.QueryRow(ctx, `SELECT parent_id FROM convo.messages WHERE id = $1`, streaming.messageID).Scan(&streamingUser); err != nil {
		t.Fatal(err)
	}
	fp := tb.treeFingerprint(t)
	_, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: other.conversationID, MessageID: streamingUser, Text: "x"})
	if conversation.ErrorCode(err) != conversation.FailedPrecondition || !strings.Contains(err.Error(), streaming.promptID.String()) {
		t.Errorf("edit while its reply streams: %v; want FailedPrecondition naming prompt %s", err, streaming.promptID)
	}
	if tb.treeFingerprint(t) != fp {
		t.Error("the refused edit changed something")
	}
}

// TestComparisonInTree: the two replies of an A/B comparison are a pair
// below their user message, counted as one version; the next message
// hangs below slot "a", and its model sees the preferred reply.
func TestComparisonInTree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	res, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: "local", Text: "pick", ModelConfigs: []json.RawMessage{json.RawMessage(`{}`), json.RawMessage(`{}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	tb.answerAll(t, map[uuid.UUID]string{res.PromptIDs[0]: "A", res.PromptIDs[1]: "B"})
	if err := tb.q.ComparisonVote(ctx, dbq.ComparisonVoteParams{OwnerID: "local", ID: res.ComparisonID.UUID, Preference: "b"}); err != nil {
		t.Fatal(err)
	}
	conv := res.ConversationID
	u2, a2 := tb.turn(t, conv, "next")
	var parent uuid.UUID
	if err := tb.pool.QueryRow(ctx, `SELECT parent_id FROM convo.messages WHERE id = $1`, u2).Scan(&parent); err != nil {
		t.Fatal(err)
	}
	if parent != res.AssistantMessageIDs[0] {
		t.Errorf("the message after a comparison hangs below %s; want slot a, %s", parent, res.AssistantMessageIDs[0])
	}
	if got, want := tb.contextText(t, a2.promptID), "pick | B | next"; got != want {
		t.Errorf("the next reply's model saw %q; want %q (the preferred reply)", got, want)
	}
	if got, want := pathText(tb.state(t, conv)), "pick | A | B | next | re: next"; got != want {
		t.Errorf("path = %q; want %q", got, want)
	}
	// Edit the next message, then switch back through slot b: both
	// replies stay shown, and the leaf is the newest below slot a.
	ed, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: u2, Text: "then"})
	if err != nil {
		t.Fatal(err)
	}
	tb.answerWith(t, ed.PromptID, "re: then")
	if got, want := pathText(tb.state(t, conv)), "pick | A | B | then ‹2/2› | re: then"; got != want {
		t.Errorf("after edit, path = %q; want %q", got, want)
	}
	leaf, err := tb.store.SwitchBranch(ctx, "local", conv, res.AssistantMessageIDs[1])
	if err != nil {
		t.Fatal(err)
	}
	if leaf != ed.AssistantMessageID {
		t.Errorf("switch to slot b: leaf %s; want the newest below the pair, %s", leaf, ed.AssistantMessageID)
	}
	if _, err := tb.store.RegenerateReply(ctx, conversation.RegenerateParams{
		OwnerID: "local", ConversationID: conv, MessageID: uuid.NullUUID{UUID: res.AssistantMessageIDs[0], Valid: true},
	}); conversation.ErrorCode(err) != conversation.FailedPrecondition {
		t.Errorf("regenerate a comparison's reply: %v; want FailedPrecondition", err)
	}
}

// TestCompactionKeepsBranches: compaction merges the deltas of every
// branch's replies and keeps the branches, their texts and the
// branchSwitched events.
func TestCompactionKeepsBranches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	answerInDeltas := func(promptID uuid.UUID, deltas ...string) {
		t.Helper()
		claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
		if err != nil || len(claimed) != 1 || claimed[0].PromptID != promptID {
			t.Fatalf("claim: %v %+v", err, claimed)
		}
		if err := tb.api.PromptStart(ctx, promptID); err != nil {
			t.Fatal(err)
		}
		block := tb.startBlock(t, promptID, "text")
		for _, d := range deltas {
			tb.append(t, block, d)
		}
		if err := tb.api.PromptComplete(ctx, promptID); err != nil {
			t.Fatal(err)
		}
	}
	first := tb.sendMessage(t, uuid.Nil, "tell me")
	conv := first.conversationID
	answerInDeltas(first.promptID, "the ", "first ", "story")
	re, err := tb.store.RegenerateReply(ctx, conversation.RegenerateParams{OwnerID: "local", ConversationID: conv})
	if err != nil {
		t.Fatal(err)
	}
	answerInDeltas(re.PromptID, "the ", "second ", "story")

	pathBefore := pathText(tb.state(t, conv))
	switchesBefore := 0
	for _, e := range tb.events(t, conv) {
		if e.Kind == conversation.EventBranchSwitched {
			switchesBefore++
		}
	}
	res, err := tb.store.CompactEvents(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if res.Prompts != 2 || res.EventsRemoved != 4 {
		t.Errorf("compact = %+v; want both branches' prompts, 2 deltas of each merged away", res)
	}
	switches := 0
	for _, e := range tb.events(t, conv) {
		if e.Kind == conversation.EventBranchSwitched {
			switches++
		}
	}
	if switches != switchesBefore || switches == 0 {
		t.Errorf("%d branchSwitched events after compaction, %d before", switches, switchesBefore)
	}
	if got := pathText(tb.state(t, conv)); got != pathBefore || got != "tell me | the second story ‹2/2›" {
		t.Errorf("after compaction the path is %q; before %q", got, pathBefore)
	}
	if _, err := tb.store.SwitchBranch(ctx, "local", conv, first.messageID); err != nil {
		t.Fatal(err)
	}
	if got, want := pathText(tb.state(t, conv)), "tell me | the first story ‹1/2›"; got != want {
		t.Errorf("the first branch after compaction: %q; want %q", got, want)
	}
}

// TestOlderMessagesFollowThePath: a snapshot's window and the pages of
// older messages (ListMessages) hold the active path only.
func TestOlderMessagesFollowThePath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	_, a1 := tb.turn(t, uuid.Nil, "one")
	conv := a1.conversationID
	u2, _ := tb.turn(t, conv, "two")
	tb.turn(t, conv, "three")
	ed, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: u2, Text: "deux"})
	if err != nil {
		t.Fatal(err)
	}
	tb.answerWith(t, ed.PromptID, "re: deux")
	// The smallest snapshot: the newest message; then a page at a time.
	st, err := tb.store.RecentState(ctx, "local", conv, 1)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for msgs, older := st.Messages, st.Older; ; {
		page := pathText(conversation.State{Messages: msgs})
		texts = append([]string{page}, texts...)
		if !older {
			break
		}
		p, err := tb.store.OlderMessages(ctx, "local", conv, msgs[0].Position, 1)
		if err != nil {
			t.Fatal(err)
		}
		msgs, older = p.Messages, p.Older
	}
	if got, want := strings.Join(texts, " | "), "one | re: one | deux ‹2/2› | re: deux"; got != want {
		t.Errorf("the snapshot and its pages: %q; want the active path %q", got, want)
	}
}

// TestLargeSwitchIsBounded: a switch to a long branch carries no more
// messages than a snapshot would (convo.snapshot_bytes), with the page
// token of the rest; the event's messages and its pages then make the
// whole active path, as GetConversation reads it. A switch that fits
// carries every message after its fork, and no token. The bound holds
// set on the pool's sessions (postgres.SetSnapshotBytes) and set by the
// Store in each path change's transaction (Store.SetSnapshotBytes, for a
// transaction pooler), which leaves no session setting behind.
func TestLargeSwitchIsBounded(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"session", "transaction"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			testLargeSwitchIsBounded(t, how == "transaction")
		})
	}
}

func testLargeSwitchIsBounded(t *testing.T, perTransaction bool) {
	ctx := context.Background()
	const bound = 4096
	var pool *pgxpool.Pool
	if perTransaction {
		pool = pgtest.Pool(t)
	} else {
		pool = pgtest.PoolWith(t, func(c *pgxpool.Config) { postgres.SetSnapshotBytes(c, bound) })
	}
	tb := &testBundle{pool: pool, store: postgres.New(pool), api: apiq.New(pool)}
	if perTransaction {
		tb.store.SetSnapshotBytes(bound)
		// Every later path change must leave the sessions unset.
		defer func() {
			var setting string
			if err := pool.QueryRow(ctx, `SELECT coalesce(current_setting('convo.snapshot_bytes', true), '')`).Scan(&setting); err != nil {
				t.Fatal(err)
			}
			if setting != "" {
				t.Errorf("a session holds convo.snapshot_bytes = %q after the path changes; want it set per transaction only", setting)
			}
		}()
	}
	tb.q = tb.store.Queries()

	_, a1 := tb.turn(t, uuid.Nil, "one")
	conv := a1.conversationID
	u2, _ := tb.turn(t, conv, "two")
	// 20 more turns of about 600 bytes: 24 KB after the fork.
	for i := range 20 {
		tb.turn(t, conv, strconv.Itoa(i)+strings.Repeat(" long", 120))
	}
	long := tb.state(t, conv)

	// The edit's new path after the fork is small: all of it, no token.
	ed, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: u2, Text: "deux"})
	if err != nil {
		t.Fatal(err)
	}
	edit := tb.switched(t, conv)
	if edit.OlderPageToken != "" || len(edit.Messages) != 2 {
		t.Errorf("the edit's branchSwitched: %d messages, token %q; want the 2 after the fork, no token", len(edit.Messages), edit.OlderPageToken)
	}
	tb.answerWith(t, ed.PromptID, "re: deux")

	// Back to the long version: only the latest messages that fit.
	if _, err := tb.store.SwitchBranch(ctx, "local", conv, u2); err != nil {
		t.Fatal(err)
	}
	back := tb.switched(t, conv)
	if back.OlderPageToken == "" {
		t.Fatalf("the switch to the long branch carried %d messages and no token; want the latest that fit %d bytes", len(back.Messages), bound)
	}
	size := 0
	for _, m := range back.Messages {
		size += 256 + len(m)
	}
	if len(back.Messages) < 1 || size > bound+2*1024 || len(back.Messages) >= len(long.Messages)-3 {
		t.Errorf("the bounded branchSwitched carries %d messages (about %d bytes); want at least one, about %d bytes", len(back.Messages), size, bound)
	}
	// Its token is the one Go makes for its first message's position, and
	// the pages before it bring the rest of the path.
	var first struct {
		ID uuid.UUID `json:"id"`
	}
	if err := json.Unmarshal(back.Messages[0], &first); err != nil {
		t.Fatal(err)
	}
	now := tb.state(t, conv)
	at := slices.IndexFunc(now.Messages, func(m conversation.Message) bool { return m.ID == first.ID })
	if at < 0 {
		t.Fatalf("the event's first message %s is not on the path", first.ID)
	}
	if want := wire.EncodeMessagesToken(now.Messages[at].Position); back.OlderPageToken != want {
		t.Errorf("olderPageToken = %q; want %q, the token of position %d", back.OlderPageToken, want, now.Messages[at].Position)
	}
	before, err := wire.DecodeMessagesToken("olderPageToken", back.OlderPageToken)
	if err != nil {
		t.Fatal(err)
	}
	held := len(back.Messages)
	for {
		p, err := tb.store.OlderMessages(ctx, "local", conv, before, bound)
		if err != nil {
			t.Fatal(err)
		}
		held += len(p.Messages)
		if !p.Older {
			break
		}
		before = p.Messages[0].Position
	}
	if held != len(now.Messages) || pathText(now) != strings.Replace(pathText(long), "two", "two ‹1/2›", 1) {
		t.Errorf("the event and its pages hold %d messages; the path has %d: %q", held, len(now.Messages), pathText(now))
	}
}

// switched is the payload of the conversation's latest branchSwitched.
func (tb *testBundle) switched(t testing.TB, conversationID uuid.UUID) (s struct {
	ForkMessageID  string            `json:"forkMessageId"`
	Messages       []json.RawMessage `json:"messages"`
	OlderPageToken string            `json:"olderPageToken"`
}) {
	t.Helper()
	events := tb.events(t, conversationID)
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Kind == conversation.EventBranchSwitched {
			if err := json.Unmarshal(events[i].Payload, &s); err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	t.Fatal("no branchSwitched")
	return s
}

// TestSnapshotBytesAfterConnect: SetSnapshotBytes bounds every
// connection of the pool, after the hook the configuration had, and puts
// nothing among the startup parameters (PgBouncer, a session pooler
// docs/deploy.md allows, refuses a connection whose startup packet holds
// one it does not know: "unsupported startup parameter").
func TestSnapshotBytesAfterConnect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var startup map[string]string
	pool := pgtest.PoolWith(t, func(c *pgxpool.Config) {
		c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, `SELECT set_config('application_name', 'earlier-hook', false)`)
			return err
		}
		postgres.SetSnapshotBytes(c, 5000)
		startup = maps.Clone(c.ConnConfig.RuntimeParams)
	})
	for k, v := range startup {
		if strings.HasPrefix(k, "convo.") {
			t.Errorf("startup parameter %s=%s: a pooler such as PgBouncer refuses the connection", k, v)
		}
	}
	// Three connections at once: each was set up.
	var conns []*pgxpool.Conn
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for i := range 3 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var bytes int64
		var app string
		if err := c.QueryRow(ctx, `SELECT convo._event_bytes(), current_setting('application_name')`).Scan(&bytes, &app); err != nil {
			t.Fatal(err)
		}
		if bytes != 5000 || app != "earlier-hook" {
			t.Errorf("connection %d: convo._event_bytes() = %d, application_name %q; want 5000 and the earlier hook's", i, bytes, app)
		}
	}
}

// TestEventBytesDefault: without convo.snapshot_bytes a branchSwitched is
// bounded as the streams' snapshots are by default.
func TestEventBytesDefault(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var got int64
	if err := tb.pool.QueryRow(context.Background(), `SELECT convo._event_bytes()`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != stream.DefaultSnapshotBytes {
		t.Errorf("convo._event_bytes() = %d without the setting; want stream.DefaultSnapshotBytes, %d", got, stream.DefaultSnapshotBytes)
	}
}

// TestEventBytesRefusesGarbage: a convo.snapshot_bytes that is not a
// whole number of bytes (set by hand) fails a change of path with an
// error naming the setting, and writes nothing; surrounding blanks are
// allowed.
func TestEventBytesRefusesGarbage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	_, r := tb.turn(t, uuid.Nil, "one")
	conn, err := tb.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	before := len(tb.events(t, r.conversationID))
	for _, v := range []string{"abc", "-4096", "0", "4096 bytes", "99999999999999999999", "1e6"} {
		if _, err := conn.Exec(ctx, `SELECT set_config('convo.snapshot_bytes', $1, false)`, v); err != nil {
			t.Fatal(err)
		}
		_, err := conn.Exec(ctx, `SELECT * FROM convo.regenerate_reply('local', $1, $2, NULL)`, r.conversationID, r.messageID)
		if err == nil || !strings.Contains(err.Error(), "convo.snapshot_bytes must be a whole number of bytes") || !strings.Contains(err.Error(), "(SQLSTATE 22023)") {
			t.Errorf("convo.snapshot_bytes %q: regenerate_reply: %v; want 22023 naming convo.snapshot_bytes", v, err)
		}
	}
	if after := len(tb.events(t, r.conversationID)); after != before {
		t.Errorf("the refused regenerations wrote %d events", after-before)
	}
	for v, want := range map[string]int64{" 8192 ": 8192, "": 262144, "1": 1} {
		if _, err := conn.Exec(ctx, `SELECT set_config('convo.snapshot_bytes', $1, false)`, v); err != nil {
			t.Fatal(err)
		}
		var got int64
		if err := conn.QueryRow(ctx, `SELECT convo._event_bytes()`).Scan(&got); err != nil || got != want {
			t.Errorf("convo.snapshot_bytes %q: convo._event_bytes() = %d, %v; want %d", v, got, err, want)
		}
	}
}
