package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// TestOpenTelemetryVotes: a rating and a comparison vote reach a real
// OTLP/HTTP receiver as spans of the rated replies' trace (the send's):
// children of the send's span, linked to the RPC that carried the vote,
// each with a gen_ai.evaluation.result event carrying the vote. A reply
// whose prompt keeps no trace context gets its rating's span in the
// rating RPC's trace instead.
func TestOpenTelemetryVotes(t *testing.T) {
	t.Parallel()
	rcv := startOTLPReceiver(t)
	m := startMain(t, map[string]string{"CONVO_WORKERS": "0", "OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL})
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sent, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{
		Text:         "Which is better?",
		Model:        &convov1.ModelConfig{Provider: "demo", Model: "small"},
		CompareModel: &convov1.ModelConfig{Provider: "demo", Model: "large"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.SubmitFeedback(ctx, connect.NewRequest(&convov1.SubmitFeedbackRequest{
		MessageId: sent.Msg.AssistantMessageId, Rating: convov1.Rating_RATING_DOWN, Comment: "too long",
	})); err != nil {
		t.Fatal(err)
	}
	if _, err := client.VoteComparison(ctx, connect.NewRequest(&convov1.VoteComparisonRequest{
		ComparisonId: sent.Msg.ComparisonId, Preference: convov1.Preference_PREFERENCE_B,
	})); err != nil {
		t.Fatal(err)
	}
	// A reply whose prompt keeps no trace context, as one sent while
	// telemetry was off.
	untraced, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{
		ConversationId: sent.Msg.ConversationId, Text: "and now?",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.pool.Exec(ctx, `UPDATE convo.prompts SET trace_context = NULL WHERE id = $1`, untraced.Msg.PromptId); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SubmitFeedback(ctx, connect.NewRequest(&convov1.SubmitFeedbackRequest{
		MessageId: untraced.Msg.AssistantMessageId, Rating: convov1.Rating_RATING_UP,
	})); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	find := func(name string) []*tracepb.Span {
		var out []*tracepb.Span
		for _, s := range rcv.spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	sends := find("convo.v1.ConversationService/SendMessage")
	ratings := find("convo.v1.ConversationService/SubmitFeedback")
	voteRPCs := find("convo.v1.ConversationService/VoteComparison")
	feedback := find("convo.feedback")
	votes := find("convo.comparison.vote")
	if len(sends) != 2 || len(ratings) != 2 || len(voteRPCs) != 1 || len(feedback) != 2 || len(votes) != 2 {
		t.Fatalf("spans: %d SendMessage, %d SubmitFeedback, %d VoteComparison, %d convo.feedback, %d convo.comparison.vote; want 2, 2, 1, 2, 2\n%s",
			len(sends), len(ratings), len(voteRPCs), len(feedback), len(votes), traceTree(rcv.spans))
	}
	t.Logf("the spans as the receiver got them:\n%s", traceTree(rcv.spans))
	send := sends[0]
	if sends[1].StartTimeUnixNano < send.StartTimeUnixNano {
		send = sends[1]
	}
	byMessage := func(spans []*tracepb.Span, id string) *tracepb.Span {
		t.Helper()
		for _, s := range spans {
			if attr(s, "convo.message.id").GetStringValue() == id {
				return s
			}
		}
		t.Fatalf("no span with convo.message.id %s:\n%s", id, traceTree(rcv.spans))
		return nil
	}
	event := func(s *tracepb.Span) map[string]any {
		t.Helper()
		if len(s.Events) != 1 || s.Events[0].Name != "gen_ai.evaluation.result" {
			t.Fatalf("%s's events = %v, want one gen_ai.evaluation.result", s.Name, s.Events)
		}
		out := map[string]any{}
		for _, a := range s.Events[0].Attributes {
			out[a.Key] = anyValue(a.Value)
		}
		return out
	}
	// inReply checks that s is a child of the send's span, linked to the
	// span of the RPC that carried the vote.
	inReply := func(s *tracepb.Span, rpcs []*tracepb.Span) {
		t.Helper()
		if string(s.TraceId) != string(send.TraceId) || string(s.ParentSpanId) != string(send.SpanId) {
			t.Errorf("%s: trace %x parent %x, want the send's trace %x and span %x", s.Name, s.TraceId, s.ParentSpanId, send.TraceId, send.SpanId)
		}
		linked := false
		for _, rpc := range rpcs {
			for _, l := range s.Links {
				linked = linked || (string(l.TraceId) == string(rpc.TraceId) && string(l.SpanId) == string(rpc.SpanId))
			}
		}
		if !linked || len(s.Links) != 1 {
			t.Errorf("%s's links = %v, want one to its RPC's span", s.Name, s.Links)
		}
	}

	rated := byMessage(feedback, sent.Msg.AssistantMessageId)
	inReply(rated, ratings)
	if got := attr(rated, "convo.feedback.rating").GetStringValue(); got != "down" {
		t.Errorf("convo.feedback.rating = %q, want down", got)
	}
	if !attr(rated, "convo.feedback.commented").GetBoolValue() {
		t.Error("convo.feedback.commented = false for a rating with a comment")
	}
	if got := attr(rated, "gen_ai.conversation.id").GetStringValue(); got != sent.Msg.ConversationId {
		t.Errorf("gen_ai.conversation.id = %q, want %q", got, sent.Msg.ConversationId)
	}
	if got := event(rated); got["gen_ai.evaluation.name"] != "convo.feedback" || got["gen_ai.evaluation.score.label"] != "down" ||
		got["gen_ai.evaluation.score.value"] != 0.0 {
		t.Errorf("the rating's event = %v", got)
	}
	for _, side := range []struct{ message, name, label string }{
		{sent.Msg.AssistantMessageId, "a", "not_preferred"}, {sent.Msg.CompareAssistantMessageId, "b", "preferred"},
	} {
		v := byMessage(votes, side.message)
		inReply(v, voteRPCs)
		if attr(v, "convo.comparison.side").GetStringValue() != side.name || attr(v, "convo.comparison.preference").GetStringValue() != "b" ||
			attr(v, "convo.comparison.id").GetStringValue() != sent.Msg.ComparisonId {
			t.Errorf("side %s's vote span: %v", side.name, v.Attributes)
		}
		if got := event(v); got["gen_ai.evaluation.name"] != "convo.comparison" || got["gen_ai.evaluation.score.label"] != side.label {
			t.Errorf("side %s's event = %v, want label %s", side.name, got, side.label)
		}
	}
	// No stored context: the child of its RPC's span, without a link.
	plain := byMessage(feedback, untraced.Msg.AssistantMessageId)
	var parent *tracepb.Span
	for _, r := range ratings {
		if string(r.SpanId) == string(plain.ParentSpanId) {
			parent = r
		}
	}
	if parent == nil || string(plain.TraceId) != string(parent.TraceId) || len(plain.Links) != 0 {
		t.Errorf("untraced reply's rating: trace %x parent %x links %v; want the child of a SubmitFeedback span", plain.TraceId, plain.ParentSpanId, plain.Links)
	}
	if got := event(plain); got["gen_ai.evaluation.score.label"] != "up" || got["gen_ai.evaluation.score.value"] != 1.0 {
		t.Errorf("the untraced reply's event = %v", got)
	}
}
