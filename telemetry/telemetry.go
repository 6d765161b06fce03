// Package telemetry starts OpenTelemetry for a convo process from the
// standard OTEL_* environment variables: a tracer provider and a meter
// provider exporting over OTLP (HTTP/protobuf or gRPC), or no-op providers
// that cost nothing when the variables ask for no exporter
// (docs/operations.md, "OpenTelemetry"). The providers are handed to what
// uses them (the Connect interceptor, the HTTP routes, the workers), never
// installed as the process's globals, so that several servers in one
// process (tests) each export their own.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Telemetry is a process's tracer and meter providers. The zero value is
// not usable; Disabled returns one that records nothing.
type Telemetry struct {
	// Tracer and Meter are the providers: the SDK's when their signal is
	// exported, no-op ones otherwise.
	Tracer trace.TracerProvider
	Meter  metric.MeterProvider
	// Propagator reads and writes W3C trace context (traceparent,
	// tracestate) and baggage.
	Propagator propagation.TextMapPropagator
	// Traces and Metrics say whether each signal is exported.
	Traces, Metrics bool
	// GenAILatest: OTEL_SEMCONV_STABILITY_OPT_IN holds
	// gen_ai_latest_experimental, so GenAI telemetry follows the latest
	// experimental conventions instead of v1.36.0's.
	GenAILatest bool

	shutdown []func(context.Context) error
}

// Disabled returns telemetry that records nothing, at no cost.
func Disabled() *Telemetry {
	return &Telemetry{Tracer: tracenoop.NewTracerProvider(), Meter: metricnoop.NewMeterProvider(), Propagator: propagator()}
}

func propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Enabled reports whether any signal is exported.
func (t *Telemetry) Enabled() bool { return t.Traces || t.Metrics }

// FromEnv starts the providers the environment (read through getenv; the
// exporters read their own OTEL_EXPORTER_OTLP_* settings from the process's
// environment) asks for, for the service named service unless
// OTEL_SERVICE_NAME names another:
//
//   - OTEL_SDK_DISABLED=true: none.
//   - OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER: "otlp" exports the
//     signal, "none" does not; unset, a signal is exported when
//     OTEL_EXPORTER_OTLP_ENDPOINT or its own OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT
//     is set. Any other exporter is an error naming the variable.
//   - OTEL_EXPORTER_OTLP_PROTOCOL / OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL:
//     http/protobuf (the default) or grpc; http/json is an error.
//
// The sampler (OTEL_TRACES_SAMPLER), the batch span processor (OTEL_BSP_*),
// the metric export interval (OTEL_METRIC_EXPORT_INTERVAL) and the
// resource (OTEL_RESOURCE_ATTRIBUTES) follow the SDK's reading of the
// spec's variables. Nothing is dialled here: an unreachable collector
// costs dropped telemetry and a logged error, never a failed start.
func FromEnv(ctx context.Context, getenv func(string) string, service string) (*Telemetry, error) {
	t := Disabled()
	t.GenAILatest = optedIn(getenv("OTEL_SEMCONV_STABILITY_OPT_IN"), "gen_ai_latest_experimental")
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return t, nil
	}
	traces, err := wanted(getenv, "TRACES")
	if err != nil {
		return nil, err
	}
	metrics, err := wanted(getenv, "METRICS")
	if err != nil {
		return nil, err
	}
	if !traces && !metrics {
		return t, nil
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	if traces {
		exp, err := traceExporter(ctx, getenv)
		if err != nil {
			return nil, err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.Tracer, t.Traces = tp, true
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}
	if metrics {
		exp, err := metricExporter(ctx, getenv)
		if err != nil {
			t.Shutdown(ctx) //nolint:errcheck // the exporter's error is the one to report
			return nil, err
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)), sdkmetric.WithResource(res))
		t.Meter, t.Metrics = mp, true
		t.shutdown = append(t.shutdown, mp.Shutdown)
	}
	return t, nil
}

// Shutdown flushes what is buffered to the collector and stops the
// providers, within ctx; it is safe to call more than once.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		if err := f(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	t.shutdown = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("flush telemetry: %w", err)
	}
	return nil
}

// optedIn reports whether the comma-separated list holds value.
func optedIn(list, value string) bool {
	for v := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(v) == value {
			return true
		}
	}
	return false
}

// wanted reports whether signal (TRACES or METRICS) is to be exported.
func wanted(getenv func(string) string, signal string) (bool, error) {
	name := "OTEL_" + signal + "_EXPORTER"
	switch v := strings.TrimSpace(getenv(name)); v {
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != "", nil
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%s: convo exports over OTLP only; want otlp or none", name, v)
	}
}

// protocol is the OTLP protocol of signal: "http/protobuf" or "grpc".
func protocol(getenv func(string) string, signal string) (string, error) {
	name := "OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		name = "OTEL_EXPORTER_OTLP_PROTOCOL"
		v = strings.TrimSpace(getenv(name))
	}
	switch v {
	case "", "http/protobuf":
		return "http/protobuf", nil
	case "grpc":
		return "grpc", nil
	default:
		return "", fmt.Errorf("%s=%s: want http/protobuf or grpc", name, v)
	}
}

func traceExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	proto, err := protocol(getenv, "TRACES")
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	endpointURL, err := endpoint(getenv, "TRACES", proto, "/v1/traces")
	if err != nil {
		return nil, err
	}
	if proto == "grpc" {
		var opts []otlptracegrpc.Option
		if endpointURL != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(endpointURL))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	} else {
		var opts []otlptracehttp.Option
		if endpointURL != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(endpointURL))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter (%s): %w", proto, err)
	}
	return exp, nil
}

func metricExporter(ctx context.Context, getenv func(string) string) (sdkmetric.Exporter, error) {
	proto, err := protocol(getenv, "METRICS")
	if err != nil {
		return nil, err
	}
	var exp sdkmetric.Exporter
	endpointURL, err := endpoint(getenv, "METRICS", proto, "/v1/metrics")
	if err != nil {
		return nil, err
	}
	if proto == "grpc" {
		var opts []otlpmetricgrpc.Option
		if endpointURL != "" {
			opts = append(opts, otlpmetricgrpc.WithEndpointURL(endpointURL))
		}
		exp, err = otlpmetricgrpc.New(ctx, opts...)
	} else {
		var opts []otlpmetrichttp.Option
		if endpointURL != "" {
			opts = append(opts, otlpmetrichttp.WithEndpointURL(endpointURL))
		}
		exp, err = otlpmetrichttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP metric exporter (%s): %w", proto, err)
	}
	return exp, nil
}

// endpoint is the URL signal is exported to as getenv says it, "" when it
// says none (the exporter's default, localhost): the signal's own
// OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT as it is, or
// OTEL_EXPORTER_OTLP_ENDPOINT with, over HTTP, the signal's path. The
// exporters read the same variables from the process's environment; this
// makes getenv's the ones that count. A value that is not an http or https
// URL is an error naming its variable.
func endpoint(getenv func(string) string, signal, proto, path string) (string, error) {
	name := "OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT"
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		name = "OTEL_EXPORTER_OTLP_ENDPOINT"
		v = strings.TrimSpace(getenv(name))
		if v != "" && proto != "grpc" {
			v = strings.TrimRight(v, "/") + path
		}
	}
	if v == "" {
		return "", nil
	}
	if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s=%s: want an http:// or https:// URL, such as http://localhost:4318", name, getenv(name))
	}
	return v, nil
}
