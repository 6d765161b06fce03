package connectapi

import (
	"context"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/convo-dev/convo/conversation"
)

// A rating or a comparison vote arrives long after the reply's spans have
// ended and been exported, so no event can be added to them. Each is
// recorded instead as a short span of its own in the reply's trace: its
// parent is the trace context the reply's prompt keeps (the span of the
// request that sent the message, the parent of convo.prompt), and it
// links to the span of the RPC that carried the vote. The vote itself is
// the span's gen_ai.evaluation.result event, which the GenAI conventions
// parent to the evaluated operation "when possible": the prompt's own
// span is not stored, so its trace is as close as it gets. A reply whose
// prompt keeps no trace context (sent with telemetry off, regenerated,
// edited) gets the span in the RPC's trace instead, as its child.

// evaluationEvent is the GenAI conventions' event for a judgement of a
// model's output.
const evaluationEvent = "gen_ai.evaluation.result"

// vote is one span to record: on the trace of messageID's reply.
type vote struct {
	name      string
	messageID uuid.UUID
	span      []attribute.KeyValue // the span's attributes
	event     []attribute.KeyValue // its evaluation event's
}

func feedbackVote(msg conversation.Message, rating conversation.Rating, commented bool) vote {
	score := 0.0
	if rating == conversation.RatingUp {
		score = 1
	}
	return vote{
		name: "convo.feedback", messageID: msg.ID,
		span: []attribute.KeyValue{
			attribute.String("gen_ai.conversation.id", msg.ConversationID.String()),
			attribute.String("convo.message.id", msg.ID.String()),
			attribute.String("convo.feedback.rating", string(rating)),
			attribute.Bool("convo.feedback.commented", commented),
		},
		event: []attribute.KeyValue{
			attribute.String("gen_ai.evaluation.name", "convo.feedback"),
			attribute.String("gen_ai.evaluation.score.label", string(rating)),
			attribute.Float64("gen_ai.evaluation.score.value", score),
		},
	}
}

// comparisonVotes is one span per side of the comparison: each reply's
// trace shows whether it was preferred.
func comparisonVotes(c conversation.Comparison) []vote {
	side := func(name string, s conversation.ComparisonSide) vote {
		label, score := "not_preferred", 0.0
		switch {
		case c.Preference == conversation.PreferTie:
			label, score = "tie", 0.5
		case string(c.Preference) == name:
			label, score = "preferred", 1
		}
		return vote{
			name: "convo.comparison.vote", messageID: s.MessageID,
			span: []attribute.KeyValue{
				attribute.String("gen_ai.conversation.id", c.ConversationID.String()),
				attribute.String("convo.message.id", s.MessageID.String()),
				attribute.String("convo.comparison.id", c.ID.String()),
				attribute.String("convo.comparison.side", name),
				attribute.String("convo.comparison.preference", string(c.Preference)),
			},
			event: []attribute.KeyValue{
				attribute.String("gen_ai.evaluation.name", "convo.comparison"),
				attribute.String("gen_ai.evaluation.score.label", label),
				attribute.Float64("gen_ai.evaluation.score.value", score),
			},
		}
	}
	return []vote{side("a", c.A), side("b", c.B)}
}

// recordVotes records votes on their replies' traces when the server
// traces (Options.Tracer). Telemetry never fails the call: a failed read
// of the trace contexts is logged, and the votes go to the RPC's trace.
func (s *service) recordVotes(ctx context.Context, owner string, votes ...vote) {
	if s.tracer == nil {
		return
	}
	ids := make([]uuid.UUID, len(votes))
	for i, v := range votes {
		ids[i] = v.messageID
	}
	stored, err := s.store.ReplyTraceContexts(ctx, owner, ids)
	if err != nil {
		s.logger.Warn("votes go to the RPC's trace: cannot read the replies' trace contexts", "err", err)
	}
	rpc := trace.SpanContextFromContext(ctx)
	for _, v := range votes {
		parent := ctx
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(v.span...)}
		if carrier, ok := stored[v.messageID]; ok {
			reply := propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(carrier))
			if sc := trace.SpanContextFromContext(reply); sc.IsValid() && sc.TraceID() != rpc.TraceID() {
				parent = reply
				if rpc.IsValid() {
					opts = append(opts, trace.WithLinks(trace.Link{SpanContext: rpc}))
				}
			}
		}
		_, span := s.tracer.Start(parent, v.name, opts...)
		span.AddEvent(evaluationEvent, trace.WithAttributes(v.event...))
		span.End()
	}
}
