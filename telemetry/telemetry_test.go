package telemetry

import (
	"context"
	"strings"
	"testing"
)

func env(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

// TestFromEnv: the signals exported follow the spec's variables, and a
// value convo cannot honour is an error naming its variable.
func TestFromEnv(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name            string
		vars            map[string]string
		traces, metrics bool
	}{
		{"unset", nil, false, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, true, true},
		{"traces endpoint only", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"}, true, false},
		{"metrics none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_METRICS_EXPORTER": "none"}, true, false},
		{"exporter otlp, grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, false},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}, false, false},
	} {
		tel, err := FromEnv(ctx, env(c.vars), "convo")
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if tel.Traces != c.traces || tel.Metrics != c.metrics {
			t.Errorf("%s: traces %v metrics %v, want %v %v", c.name, tel.Traces, tel.Metrics, c.traces, c.metrics)
		}
		if err := tel.Shutdown(ctx); err != nil && tel.Enabled() && !strings.Contains(err.Error(), "flush") {
			t.Errorf("%s: shutdown: %v", c.name, err)
		}
	}
	for vars, want := range map[string]map[string]string{
		"OTEL_TRACES_EXPORTER=zipkin":                {"OTEL_TRACES_EXPORTER": "zipkin"},
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/json":      {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
		"OTEL_EXPORTER_OTLP_ENDPOINT=localhost:4318": {"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"},
		"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=thrift": {"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "thrift"},
	} {
		_, err := FromEnv(ctx, env(want), "convo")
		if err == nil || !strings.Contains(err.Error(), vars) {
			t.Errorf("%v: err = %v, want one naming %s", want, err, vars)
		}
	}
	if tel, _ := FromEnv(ctx, env(map[string]string{"OTEL_SEMCONV_STABILITY_OPT_IN": "http, gen_ai_latest_experimental"}), "convo"); !tel.GenAILatest {
		t.Error("OTEL_SEMCONV_STABILITY_OPT_IN=http, gen_ai_latest_experimental: GenAILatest false")
	}
}
