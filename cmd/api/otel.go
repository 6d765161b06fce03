package main

import (
	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel/trace"

	"github.com/convo-dev/convo/telemetry"
)

// rpcTelemetry is the Connect interceptor that traces every RPC (a server
// span per call, the child of the traceparent the call carries) and
// records the rpc.server.* metrics, as m.telemetry exports them; nil when
// it exports nothing.
func (m *Main) rpcTelemetry() connect.Interceptor {
	t := m.httpTelemetry()
	if !t.Enabled() {
		return nil
	}
	opts := []otelconnect.Option{
		otelconnect.WithTracerProvider(t.Tracer), otelconnect.WithMeterProvider(t.Meter),
		otelconnect.WithPropagator(t.Propagator),
		// A client's traceparent makes the RPC part of the client's trace
		// (the app's backend, a test), as the HTTP routes do.
		otelconnect.WithTrustRemote(),
	}
	if !t.Traces {
		opts = append(opts, otelconnect.WithoutTracing())
	}
	if !t.Metrics {
		opts = append(opts, otelconnect.WithoutMetrics())
	}
	interceptor, err := otelconnect.NewInterceptor(opts...)
	if err != nil {
		// Only invalid options fail, and these are fixed.
		panic(err)
	}
	return interceptor
}

// httpTelemetry is m.telemetry, or telemetry that records nothing before
// Run made it (tests that serve the routes alone).
func (m *Main) httpTelemetry() *telemetry.Telemetry {
	if m.telemetry == nil {
		return telemetry.Disabled()
	}
	return m.telemetry
}

// voteTracer records ratings and comparison votes on the replies' traces
// (connectapi.Options.Tracer); nil when traces are not exported, so that
// no vote costs a read of its reply's trace context then.
func (m *Main) voteTracer() trace.TracerProvider {
	if t := m.httpTelemetry(); t.Traces {
		return t.Tracer
	}
	return nil
}
