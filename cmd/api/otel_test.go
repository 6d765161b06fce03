package main

import (
	"cmp"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// otlpReceiver is an OTLP/HTTP (protobuf) collector: it decodes what the
// exporters send, in the real wire format, and keeps it.
type otlpReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	metrics map[string]bool // names received
	service string          // service.name of the spans' resource
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{metrics: map[string]bool{}}
	read := func(w http.ResponseWriter, req *http.Request, msg proto.Message) bool {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return false
			}
			body = gz
		}
		b, err := io.ReadAll(body)
		if err == nil {
			err = proto.Unmarshal(b, msg)
		}
		if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP request %s (%s): %v", req.URL.Path, req.Header.Get("Content-Type"), err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return false
		}
		return true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		var msg coltracepb.ExportTraceServiceRequest
		if !read(w, req, &msg) {
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					r.service = a.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(b) //nolint:errcheck // the exporter retries
	})
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, req *http.Request) {
		var msg colmetricpb.ExportMetricsServiceRequest
		if !read(w, req, &msg) {
			return
		}
		r.mu.Lock()
		for _, rm := range msg.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					r.metrics[m.Name] = true
				}
			}
		}
		r.mu.Unlock()
		b, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(b) //nolint:errcheck // the exporter retries
	})
	r.Server = httptest.NewServer(mux)
	t.Cleanup(r.Close)
	return r
}

func attr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value
		}
	}
	return nil
}

// TestOpenTelemetryTrace: with OTEL_EXPORTER_OTLP_ENDPOINT set, one reply
// through the production wiring (a SendMessage over Connect answered by
// the in-process demo worker, calling the calculator) reaches a real
// OTLP/HTTP receiver as one trace: the send's RPC span, the prompt's span
// (its child, continued by the worker from the trace context stored with
// the prompt), the model round with its GenAI attributes and usage, and
// the tool call under that round; and the GenAI metrics are exported.
func TestOpenTelemetryTrace(t *testing.T) {
	t.Parallel()
	rcv := startOTLPReceiver(t)
	m := startMain(t, map[string]string{"CONVO_DEMO_TOKENS_PER_SECOND": "5000", "OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL})
	if !m.telemetry.Traces || !m.telemetry.Metrics {
		t.Fatalf("telemetry: traces %v, metrics %v; want both with OTEL_EXPORTER_OTLP_ENDPOINT", m.telemetry.Traces, m.telemetry.Metrics)
	}
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sent, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: `/call calculator {"expression": "6*7"}`}))
	if err != nil {
		t.Fatal(err)
	}
	for {
		got, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.Msg.ConversationId}))
		if err != nil {
			t.Fatal(err)
		}
		if st := got.Msg.Messages[len(got.Msg.Messages)-1].Status; st == "completed" {
			break
		} else if st == "failed" {
			t.Fatalf("the reply failed: %v", got.Msg.Messages[len(got.Msg.Messages)-1])
		}
		time.Sleep(20 * time.Millisecond)
	}
	// An open-protocol route: a server span named by its route.
	resp, err := http.Get(m.URL() + "/v1/conversations/" + sent.Msg.ConversationId + "/history")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the span matters
	resp.Body.Close()
	// Close flushes the spans and metrics.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.service != "convo" {
		t.Errorf("service.name = %q, want convo", rcv.service)
	}
	find := func(name string) []*tracepb.Span {
		var out []*tracepb.Span
		for _, s := range rcv.spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	send := find("convo.v1.ConversationService/SendMessage")
	prompts := find("convo.prompt")
	chats := find("chat demo")
	tools := find("execute_tool calculator")
	if len(send) != 1 || len(prompts) != 1 || len(chats) != 2 || len(tools) != 1 {
		t.Fatalf("spans: %d SendMessage, %d convo.prompt, %d chat demo, %d execute_tool calculator; want 1, 1, 2, 1\n%s",
			len(send), len(prompts), len(chats), len(tools), traceTree(rcv.spans))
	}
	t.Logf("the trace as the receiver got it:\n%s", traceTree(rcv.spans))
	// One trace, in parent order: send → prompt → chat → execute_tool.
	trace := send[0].TraceId
	for _, s := range []*tracepb.Span{prompts[0], chats[0], chats[1], tools[0]} {
		if string(s.TraceId) != string(trace) {
			t.Errorf("span %s is in trace %x, not the send's %x", s.Name, s.TraceId, trace)
		}
	}
	if string(prompts[0].ParentSpanId) != string(send[0].SpanId) {
		t.Errorf("convo.prompt's parent = %x, want the SendMessage span %x", prompts[0].ParentSpanId, send[0].SpanId)
	}
	first := chats[0]
	if chats[1].StartTimeUnixNano < first.StartTimeUnixNano {
		first = chats[1]
	}
	for _, c := range chats {
		if string(c.ParentSpanId) != string(prompts[0].SpanId) {
			t.Errorf("chat's parent = %x, want the prompt's span %x", c.ParentSpanId, prompts[0].SpanId)
		}
	}
	if string(tools[0].ParentSpanId) != string(first.SpanId) {
		t.Errorf("execute_tool's parent = %x, want the first round's span %x", tools[0].ParentSpanId, first.SpanId)
	}
	if got := attr(prompts[0], "gen_ai.conversation.id").GetStringValue(); got != sent.Msg.ConversationId {
		t.Errorf("convo.prompt's gen_ai.conversation.id = %q, want %q", got, sent.Msg.ConversationId)
	}
	if got := attr(prompts[0], "convo.prompt.outcome").GetStringValue(); got != "completed" {
		t.Errorf("convo.prompt's outcome = %q", got)
	}
	for key, want := range map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "demo", "gen_ai.system": "demo",
		"gen_ai.conversation.id": sent.Msg.ConversationId,
	} {
		if got := attr(first, key).GetStringValue(); got != want {
			t.Errorf("chat's %s = %q, want %q", key, got, want)
		}
	}
	for _, key := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
		if got := attr(first, key).GetIntValue(); got <= 0 {
			t.Errorf("chat's %s = %d, want the demo model's count", key, got)
		}
	}
	if h := find("GET /v1/conversations/{id}/history"); len(h) != 1 || attr(h[0], "http.route").GetStringValue() != "/v1/conversations/{id}/history" ||
		attr(h[0], "http.response.status_code").GetIntValue() != 200 || h[0].Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("history route spans: %v", h)
	}
	if got := attr(tools[0], "gen_ai.tool.name").GetStringValue(); got != "calculator" {
		t.Errorf("execute_tool's gen_ai.tool.name = %q", got)
	}
	if got := attr(tools[0], "gen_ai.operation.name").GetStringValue(); got != "execute_tool" {
		t.Errorf("execute_tool's gen_ai.operation.name = %q", got)
	}
	for _, name := range []string{"gen_ai.client.token.usage", "gen_ai.client.operation.duration", "gen_ai.server.time_to_first_token",
		"gen_ai.server.time_per_output_token", "convo.prompt.queue_wait", "convo.replies.in_flight", "rpc.server.call.duration"} {
		if !rcv.metrics[name] {
			t.Errorf("metric %s not exported; got %v", name, rcv.metrics)
		}
	}
}

// TestOpenTelemetryOff: without the OTEL_* variables nothing is exported
// and nothing is kept: no provider of the SDK runs, the Connect
// interceptor and the HTTP middleware are not installed, and the prompt
// a send queues keeps no trace context.
func TestOpenTelemetryOff(t *testing.T) {
	t.Parallel()
	m := startMain(t, map[string]string{"CONVO_WORKERS": "0"})
	if m.telemetry.Enabled() {
		t.Fatalf("telemetry on without OTEL_* variables: %+v", m.telemetry)
	}
	if m.rpcTelemetry() != nil {
		t.Error("a Connect telemetry interceptor without OTEL_* variables")
	}
	if tp := fmt.Sprintf("%T", m.telemetry.Tracer); !strings.Contains(tp, "noop") {
		t.Errorf("tracer provider %s, want the no-op one", tp)
	}
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	sent, err := client.SendMessage(context.Background(), connect.NewRequest(&convov1.SendMessageRequest{Text: "untraced"}))
	if err != nil {
		t.Fatal(err)
	}
	var kept bool
	if err := m.pool.QueryRow(context.Background(),
		`SELECT trace_context IS NOT NULL FROM convo.prompts WHERE id = $1`, sent.Msg.PromptId).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if kept {
		t.Error("the prompt keeps a trace context with telemetry off")
	}
}

// traceTree prints spans as an indented tree, children under parents, in
// start order: the docs' example trace.
func traceTree(spans []*tracepb.Span) string {
	byParent := map[string][]*tracepb.Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[string(s.SpanId)] = true
	}
	for _, s := range spans {
		p := string(s.ParentSpanId)
		if !ids[p] {
			p = ""
		}
		byParent[p] = append(byParent[p], s)
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		kids := byParent[parent]
		slices.SortFunc(kids, func(a, b *tracepb.Span) int { return cmp.Compare(a.StartTimeUnixNano, b.StartTimeUnixNano) })
		for _, s := range kids {
			var attrs []string
			for _, a := range s.Attributes {
				if strings.HasPrefix(a.Key, "gen_ai.") || strings.HasPrefix(a.Key, "convo.prompt.outcome") || a.Key == "http.route" {
					attrs = append(attrs, fmt.Sprintf("%s=%v", a.Key, anyValue(a.Value)))
				}
			}
			fmt.Fprintf(&b, "%s%s [%s] %s %s\n", strings.Repeat("  ", depth), s.Name, strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_"),
				hex.EncodeToString(s.SpanId)[:8], strings.Join(attrs, " "))
			walk(string(s.SpanId), depth+1)
		}
	}
	walk("", 0)
	return b.String()
}

func anyValue(v *commonpb.AnyValue) any {
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.Values {
			out = append(out, anyValue(e))
		}
		return out
	}
	return v.String()
}
