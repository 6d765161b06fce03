package postgres

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceContext is the W3C trace context (traceparent, and tracestate when
// there is one) of the span ctx carries, as the JSON object
// convo.send_messages keeps with the prompts it queues, so that the worker
// that claims one continues the request's trace (convo.prompt_trace). ""
// when ctx carries no valid span context: telemetry is off.
func traceContext(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return ""
	}
	b, err := json.Marshal(carrier)
	if err != nil {
		return "" // a map of strings always marshals
	}
	return string(b)
}
