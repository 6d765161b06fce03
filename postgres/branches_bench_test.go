package postgres_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
)

// BenchmarkSwitchLongBranch measures a switch between the two versions of
// the second turn of a conversation of 800 turns (1,600 messages of about
// 500 bytes after the fork on one branch, 2 on the other), with the
// default bound on a branchSwitched (256 KiB, as the streams' snapshots):
// each op is a switch to the long branch and one back. event-bytes is the
// size of the long branch's event.
//
//	go test -run '^$' -bench SwitchLongBranch -benchtime 20x ./postgres/
func BenchmarkSwitchLongBranch(b *testing.B) {
	ctx := context.Background()
	tb := setup(b)
	conv, err := pgtest.FillConversation(ctx, tb.pool.Config().ConnString(), "local", 800, 500)
	if err != nil {
		b.Fatal(err)
	}
	st := tb.state(b, conv)
	second := st.Messages[2].ID
	ed, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: second, Text: "deux"})
	if err != nil {
		b.Fatal(err)
	}
	tb.answerWith(b, ed.PromptID, "re: deux")
	size := 0
	for b.Loop() {
		if _, err := tb.store.SwitchBranch(ctx, "local", conv, second); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		size = eventSize(b, tb, conv)
		b.StartTimer()
		if _, err := tb.store.SwitchBranch(ctx, "local", conv, ed.UserMessageID); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size), "event-bytes")
}

// eventSize is the size of the conversation's latest event's payload.
func eventSize(t testing.TB, tb *testBundle, conv uuid.UUID) int {
	t.Helper()
	var n int
	if err := tb.pool.QueryRow(context.Background(),
		`SELECT octet_length(payload::text) FROM convo.events WHERE conversation_id = $1 ORDER BY seq DESC LIMIT 1`, conv).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
