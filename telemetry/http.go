package telemetry

import (
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/convo-dev/convo/conversation"
)

// HTTP wraps h, a handler whose ServeMux sets the request's Pattern, with a
// server span per request named "{method} {route}" (the pattern without its
// method), a child of the trace context the request carries (traceparent),
// with the HTTP semantic conventions' attributes and an error status for a
// 5xx answer. It returns h itself when traces are not exported. The span
// lasts as long as the handler: a stream's span spans the stream.
func (t *Telemetry) HTTP(h http.Handler) http.Handler {
	if !t.Traces {
		return h
	}
	tracer := t.Tracer.Tracer("github.com/convo-dev/convo/httpapi")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := t.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method), attribute.String("url.path", conversation.RedactedPath(r.URL.Path)),
			attribute.String("url.scheme", scheme(r)), attribute.String("server.address", r.Host),
			attribute.String("user_agent.original", r.UserAgent()),
		))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w}
		r = r.WithContext(ctx)
		h.ServeHTTP(sw, r)
		// The mux set the route it matched on r as it served it.
		if route := routeOf(r.Pattern); route != "" {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetAttributes(attribute.String("error.type", fmt.Sprint(status)))
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}

// routeOf is a ServeMux pattern without its method and host:
// "POST /v1/ai-sdk/chat" is "/v1/ai-sdk/chat".
func routeOf(pattern string) string {
	for i := range len(pattern) {
		if pattern[i] == '/' {
			return pattern[i:]
		}
	}
	return ""
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// statusWriter remembers the status written. Unwrap keeps
// http.ResponseController working (write deadlines, flushes) through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes a stream's events to the client.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
