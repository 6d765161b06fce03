package postgres_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/convo-dev/convo/conversation"
)

// TestPathChangesKeepTheTraceContext: a reply queued by a regeneration,
// an edit or a send after a message keeps the trace context of the
// request's span, as a sent message's does, with and without the
// snapshot bound of SetSnapshotBytes (both set in one transaction); a
// call without a span keeps none.
func TestPathChangesKeepTheTraceContext(t *testing.T) {
	t.Parallel()
	for _, bound := range []int{0, 64 << 10} {
		tb := setup(t)
		tb.store.SetSnapshotBytes(bound)
		u1, a1 := tb.turn(t, uuid.Nil, "one")
		conv := a1.conversationID

		span := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
			SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
			TraceFlags: trace.FlagsSampled,
		})
		traced := trace.ContextWithSpanContext(context.Background(), span)
		want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

		re, err := tb.store.RegenerateReply(traced, conversation.RegenerateParams{OwnerID: "local", ConversationID: conv})
		if err != nil {
			t.Fatal(err)
		}
		tb.answerWith(t, re.PromptID, "again")
		ed, err := tb.store.EditMessage(traced, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: u1, Text: "uno"})
		if err != nil {
			t.Fatal(err)
		}
		tb.answerWith(t, ed.PromptID, "re: uno")
		after, err := tb.store.SendAfter(traced, conversation.SendAfterParams{
			OwnerID: "local", ConversationID: conv, AfterMessageID: ed.AssistantMessageID, Text: "two",
		})
		if err != nil {
			t.Fatal(err)
		}
		tb.answerWith(t, after.PromptID, "re: two")
		untraced, err := tb.store.RegenerateReply(context.Background(), conversation.RegenerateParams{OwnerID: "local", ConversationID: conv})
		if err != nil {
			t.Fatal(err)
		}

		replies := map[string]uuid.UUID{"regenerated": re.MessageID, "edited": ed.AssistantMessageID}
		ids := []uuid.UUID{re.MessageID, ed.AssistantMessageID, untraced.MessageID}
		var afterReply uuid.UUID
		if err := tb.pool.QueryRow(context.Background(),
			`SELECT message_id FROM convo.prompts WHERE id = $1`, after.PromptID).Scan(&afterReply); err != nil {
			t.Fatal(err)
		}
		replies["sent after"] = afterReply
		ids = append(ids, afterReply)
		got, err := tb.store.ReplyTraceContexts(context.Background(), "local", ids)
		if err != nil {
			t.Fatal(err)
		}
		for name, id := range replies {
			if tp := got[id]["traceparent"]; tp != want {
				t.Errorf("bound %d: the %s reply's traceparent = %q; want %q", bound, name, tp, want)
			}
		}
		if tc, ok := got[untraced.MessageID]; ok {
			t.Errorf("bound %d: a regeneration without a span kept %v", bound, tc)
		}
	}
}
