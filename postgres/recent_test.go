package postgres_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// messageIDs are the ids of ms in order.
func messageIDs(ms []conversation.Message) []uuid.UUID {
	ids := make([]uuid.UUID, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// TestRecentStateAndOlderPages: a bounded state holds the latest messages
// within the budget, and paging back from it with OlderMessages gives
// every message exactly once, in order, each as State has it.
func TestRecentStateAndOlderPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	// 30 exchanges: 60 messages, each reply 10 KB.
	id, err := pgtest.FillConversation(ctx, dsn, "local", 30, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	whole := tb.state(t, id)
	if len(whole.Messages) != 60 || whole.Older {
		t.Fatalf("whole state: %d messages, older %v; want 60, false", len(whole.Messages), whole.Older)
	}

	const budget = 50_000
	recent, err := tb.store.RecentState(ctx, "local", id, budget)
	if err != nil {
		t.Fatal(err)
	}
	// Each exchange is about 10 KB + 2 × 256 bytes and a short question:
	// four exchanges fit in 50,000 bytes, a fifth does not.
	if got := len(recent.Messages); got != 8 || !recent.Older {
		t.Fatalf("recent state: %d messages, older %v; want 8, true", got, recent.Older)
	}
	if recent.Seq != whole.Seq || recent.Conversation.ID != id {
		t.Errorf("recent state at seq %d of %s, want %d of %s", recent.Seq, recent.Conversation.ID, whole.Seq, id)
	}
	got := recent.Messages
	before := got[0].Position
	for pages := 0; ; pages++ {
		if pages > 60 {
			t.Fatal("paging does not end")
		}
		page, err := tb.store.OlderMessages(ctx, "local", id, before, budget)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Messages) == 0 {
			t.Fatalf("empty page before position %d", before)
		}
		got = append(slices.Clone(page.Messages), got...)
		if !page.Older {
			break
		}
		before = page.Messages[0].Position
	}
	if !slices.Equal(messageIDs(got), messageIDs(whole.Messages)) {
		t.Fatalf("paged messages differ from the whole state's")
	}
	for i, m := range got {
		if w := whole.Messages[i]; len(m.Blocks) != len(w.Blocks) || (len(m.Blocks) > 0 && m.Blocks[0].Content != w.Blocks[0].Content) {
			t.Fatalf("message %d: blocks differ from the whole state's", i)
		}
	}
}

// TestRecentStateKeepsWhatIsLive: the newest message is in however large
// it is, and so is a reply still being written, with what follows it.
func TestRecentStateKeepsWhatIsLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	id, err := pgtest.FillConversation(ctx, dsn, "local", 3, 20_000)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tb.store.RecentState(ctx, "local", id, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Messages) != 1 || !st.Older || len(st.Messages[0].Blocks[0].Content) != 20_000 {
		t.Fatalf("a budget smaller than the newest message: %d messages, older %v; want the newest alone", len(st.Messages), st.Older)
	}

	// A reply streaming, then a second message queued after it: both are
	// in, with the user message between, whatever the budget.
	r := tb.sendMessage(t, id, "one more")
	claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	if err := tb.api.PromptStart(ctx, r.promptID); err != nil {
		t.Fatal(err)
	}
	block := tb.startBlock(t, r.promptID, "text")
	tb.append(t, block, strings.Repeat("x", 30_000))
	queued := tb.sendMessage(t, id, "and another")
	st, err = tb.store.RecentState(ctx, "local", id, 4096)
	if err != nil {
		t.Fatal(err)
	}
	ids := messageIDs(st.Messages)
	if len(ids) != 4 || ids[1] != r.messageID || ids[3] != queued.messageID {
		t.Fatalf("with a reply streaming: got %d messages %v; want its question, it, the next question and its reply", len(ids), ids)
	}
	if got := st.Messages[1].Blocks[0].Content; len(got) != 30_000 {
		t.Errorf("the streaming block holds %d bytes, want 30000", len(got))
	}
}

// TestOlderMessagesOwnership: another owner's conversation is NotFound,
// as everywhere.
func TestOlderMessagesOwnership(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	id, err := pgtest.FillConversation(ctx, dsn, "local", 2, 100)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tb.store.OlderMessages(ctx, "someone-else", id, 1<<40, 4096)
	if conversation.ErrorCode(err) != conversation.NotFound {
		t.Fatalf("another owner's conversation: %v, want NotFound", err)
	}
	page, err := tb.store.OlderMessages(ctx, "local", id, 1, 4096)
	if err != nil || len(page.Messages) != 0 || page.Older {
		t.Fatalf("before the first message: %+v, %v; want an empty page", page, err)
	}
}
