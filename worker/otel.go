package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/convo-dev/convo/telemetry"
	"github.com/convo-dev/convo/worker/internal/wdb"
)

// The attributes of the GenAI semantic conventions the workers set
// (docs/operations.md, "OpenTelemetry").
const (
	attrOperation      = "gen_ai.operation.name"
	attrSystem         = "gen_ai.system"        // v1.36.0 and before
	attrProvider       = "gen_ai.provider.name" // the latest experimental, in place of gen_ai.system
	attrRequestModel   = "gen_ai.request.model"
	attrTemperature    = "gen_ai.request.temperature"
	attrMaxTokens      = "gen_ai.request.max_tokens"
	attrResponseID     = "gen_ai.response.id"
	attrResponseModel  = "gen_ai.response.model"
	attrFinishReasons  = "gen_ai.response.finish_reasons"
	attrConversationID = "gen_ai.conversation.id"
	attrInputTokens    = "gen_ai.usage.input_tokens"
	attrOutputTokens   = "gen_ai.usage.output_tokens"
	attrToolName       = "gen_ai.tool.name"
	attrToolCallID     = "gen_ai.tool.call.id"
	attrToolType       = "gen_ai.tool.type" // the latest experimental only
	attrTokenType      = "gen_ai.token.type"
	attrErrorType      = "error.type"
)

// poolTelemetry is what a pool records through OpenTelemetry: a span per
// prompt, per model round and per tool call, and the GenAI metrics. A nil
// *poolTelemetry (telemetry off) records nothing and costs nothing.
type poolTelemetry struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	// latest: the latest experimental GenAI conventions
	// (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental).
	latest bool

	tokens    metric.Int64Histogram
	duration  metric.Float64Histogram
	ttft      metric.Float64Histogram
	tpot      metric.Float64Histogram
	queueWait metric.Float64Histogram
	inFlight  metric.Int64UpDownCounter
}

// newPoolTelemetry returns nil when t exports nothing.
func newPoolTelemetry(t *telemetry.Telemetry) *poolTelemetry {
	if t == nil || !t.Enabled() {
		return nil
	}
	pt := &poolTelemetry{
		tracer: t.Tracer.Tracer("github.com/convo-dev/convo/worker"),
		prop:   t.Propagator, latest: t.GenAILatest,
	}
	m := t.Meter.Meter("github.com/convo-dev/convo/worker")
	// An instrument that cannot be made is a no-op one (the API's
	// contract), so the errors below only say a name was malformed.
	pt.tokens, _ = m.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens a model round took, by gen_ai.token.type (input or output)."),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864))
	pt.duration, _ = m.Float64Histogram("gen_ai.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a model round took, from the request to its last event."),
		metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92))
	pt.ttft, _ = m.Float64Histogram("gen_ai.server.time_to_first_token", metric.WithUnit("s"),
		metric.WithDescription("From a model round's request to its first output."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0))
	pt.tpot, _ = m.Float64Histogram("gen_ai.server.time_per_output_token", metric.WithUnit("s"),
		metric.WithDescription("A model round's time per output token after the first."),
		metric.WithExplicitBucketBoundaries(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5))
	pt.queueWait, _ = m.Float64Histogram("convo.prompt.queue_wait", metric.WithUnit("s"),
		metric.WithDescription("From a prompt's send to its first claim, by the database's clock."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300))
	pt.inFlight, _ = m.Int64UpDownCounter("convo.replies.in_flight", metric.WithUnit("{reply}"),
		metric.WithDescription("Replies this process's workers are writing now."))
	return pt
}

// providerAttr names the model's provider by the conventions in use.
func (pt *poolTelemetry) providerAttr(provider string) attribute.KeyValue {
	if pt.latest {
		return attribute.String(attrProvider, provider)
	}
	return attribute.String(attrSystem, provider)
}

// promptSpan is a prompt's span, from its claim to its settlement.
type promptSpan struct {
	span trace.Span
	pt   *poolTelemetry
}

// startPrompt starts the span of a claimed prompt as a child of the trace
// context it was queued with (that of the request that sent its message;
// none: a trace of its own), and returns ctx carrying it.
func (pt *poolTelemetry) startPrompt(ctx context.Context, claim wdb.PromptClaimManyRow, worker string) (context.Context, *promptSpan) {
	if pt == nil {
		return ctx, nil
	}
	var carrier propagation.MapCarrier
	if len(claim.TraceContext) > 0 && json.Unmarshal(claim.TraceContext, &carrier) == nil && len(carrier) > 0 {
		ctx = pt.prop.Extract(ctx, carrier)
	}
	ctx, span := pt.tracer.Start(ctx, "convo.prompt", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("convo.prompt.id", claim.PromptID.String()),
		attribute.String("convo.message.id", claim.MessageID.String()),
		attribute.String(attrConversationID, claim.ConversationID.String()),
		attribute.String("convo.worker.name", worker),
		attribute.Int("convo.prompt.attempt", int(claim.Attempts)),
		attribute.Bool("convo.prompt.resumed", claim.Resumed),
		attribute.Float64("convo.prompt.queued_seconds", claim.QueuedSeconds),
	))
	span.AddEvent("claimed")
	if claim.Attempts <= 1 && !claim.Resumed {
		pt.queueWait.Record(ctx, claim.QueuedSeconds)
	}
	pt.inFlight.Add(ctx, 1)
	return ctx, &promptSpan{span: span, pt: pt}
}

// end ends the span with the prompt's outcome (an event of that name),
// its usage, and an error status when it failed.
func (s *promptSpan) end(outcome Outcome, err error, usage *Usage) {
	if s == nil {
		return
	}
	s.pt.inFlight.Add(context.Background(), -1)
	s.span.SetAttributes(attribute.String("convo.prompt.outcome", string(outcome)))
	if usage != nil {
		s.span.SetAttributes(attribute.Int64(attrInputTokens, usage.InputTokens), attribute.Int64(attrOutputTokens, usage.OutputTokens))
	}
	s.span.AddEvent(string(outcome))
	if outcome == OutcomeFailed && err != nil {
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}

// roundSpan is one model round's span ("chat {model}").
type roundSpan struct {
	span    trace.Span
	ctx     context.Context
	pt      *poolTelemetry
	started time.Time
	attrs   []attribute.KeyValue // the metrics'
}

// startRound starts a model round's span under ctx's (the prompt's).
func (pt *poolTelemetry) startRound(ctx context.Context, cfg ModelConfig, conversationID string) *roundSpan {
	if pt == nil {
		return nil
	}
	// A provider without model names (the demo) is its one model.
	model := cmp.Or(cfg.Model, cfg.Provider)
	attrs := []attribute.KeyValue{
		attribute.String(attrOperation, "chat"), pt.providerAttr(cfg.Provider), attribute.String(attrRequestModel, model),
	}
	spanAttrs := append([]attribute.KeyValue{attribute.String(attrConversationID, conversationID)}, attrs...)
	if cfg.Temperature != nil {
		spanAttrs = append(spanAttrs, attribute.Float64(attrTemperature, *cfg.Temperature))
	}
	if cfg.MaxTokens != nil {
		spanAttrs = append(spanAttrs, attribute.Int(attrMaxTokens, int(*cfg.MaxTokens)))
	}
	ctx, span := pt.tracer.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(spanAttrs...))
	return &roundSpan{span: span, ctx: ctx, pt: pt, started: time.Now(), attrs: attrs}
}

// context is the round's context, for the model's call and the round's
// tool calls; ctx when telemetry is off.
func (s *roundSpan) context(ctx context.Context) context.Context {
	if s == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, s.span)
}

// end ends the round: its finish (nil when it broke off), the time of its
// first output (zero: none), and the error that ended it, if any.
func (s *roundSpan) end(finish *Finish, firstOutput time.Time, err error) {
	if s == nil {
		return
	}
	ended := time.Now()
	ctx := context.Background()
	attrs := s.attrs
	if finish != nil {
		if finish.ResponseModel != "" {
			attrs = append(attrs, attribute.String(attrResponseModel, finish.ResponseModel))
		}
		s.span.SetAttributes(attribute.StringSlice(attrFinishReasons, []string{string(finish.Reason)}))
		if finish.ResponseID != "" {
			s.span.SetAttributes(attribute.String(attrResponseID, finish.ResponseID))
		}
		if finish.Reason == FinishError && err == nil {
			err = errors.New(finish.Error)
		}
	}
	if err != nil {
		attrs = append(attrs, attribute.String(attrErrorType, errorType(err)))
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.SetAttributes(attrs[len(s.attrs):]...)
	set := metric.WithAttributeSet(attribute.NewSet(attrs...))
	s.pt.duration.Record(ctx, ended.Sub(s.started).Seconds(), set)
	if !firstOutput.IsZero() {
		s.pt.ttft.Record(ctx, firstOutput.Sub(s.started).Seconds(), set)
	}
	if finish != nil && finish.Usage != nil {
		u := finish.Usage
		s.span.SetAttributes(attribute.Int64(attrInputTokens, u.InputTokens), attribute.Int64(attrOutputTokens, u.OutputTokens))
		s.pt.tokens.Record(ctx, u.InputTokens, metric.WithAttributeSet(attribute.NewSet(append(attrs, attribute.String(attrTokenType, "input"))...)))
		s.pt.tokens.Record(ctx, u.OutputTokens, metric.WithAttributeSet(attribute.NewSet(append(attrs, attribute.String(attrTokenType, "output"))...)))
		if u.OutputTokens > 1 && !firstOutput.IsZero() {
			s.pt.tpot.Record(ctx, ended.Sub(firstOutput).Seconds()/float64(u.OutputTokens-1), set)
		}
	}
	s.span.End()
}

// errorType is the error.type of an error that ended a round.
func errorType(err error) string {
	var me *errModel
	switch {
	case errors.As(err, &me):
		return "model_error"
	case errors.Is(err, context.Canceled), errors.Is(err, errCancelled), errors.Is(err, errShutdown):
		return "cancelled"
	}
	return "_OTHER"
}

// toolSpan is one tool call's span ("execute_tool {tool}").
type toolSpan struct{ span trace.Span }

// startTool starts a tool call's span under the round that asked for it.
func (s *roundSpan) startTool(c *pendingCall) *toolSpan {
	if s == nil {
		return nil
	}
	attrs := []attribute.KeyValue{
		attribute.String(attrOperation, "execute_tool"), attribute.String(attrToolName, c.name),
		attribute.String(attrToolCallID, c.id), attribute.String("convo.tool_call.id", c.toolCallID.String()),
	}
	if s.pt.latest {
		attrs = append(attrs, attribute.String(attrToolType, "function"))
	}
	_, span := s.pt.tracer.Start(s.ctx, "execute_tool "+c.name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return &toolSpan{span: span}
}

// end ends the call's span; errText, when set, is why the tool failed.
func (s *toolSpan) end(errText string) {
	if s == nil {
		return
	}
	if errText != "" {
		s.span.SetAttributes(attribute.String(attrErrorType, "tool_error"))
		s.span.SetStatus(codes.Error, errText)
	}
	s.span.End()
}
