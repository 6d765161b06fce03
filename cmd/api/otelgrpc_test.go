package main

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// otlpGRPCReceiver is an OTLP/gRPC collector: the OTLP protos' collector
// services served by grpc-go, keeping what the exporters send.
type otlpGRPCReceiver struct {
	addr        string
	mu          sync.Mutex
	spans       []*tracepb.Span
	metrics     map[string]bool
	service     string
	contentType []string // of the trace exports
}

func startOTLPGRPCReceiver(t *testing.T) *otlpGRPCReceiver {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpGRPCReceiver{addr: lis.Addr().String(), metrics: map[string]bool{}}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, traceService{r: r})
	colmetricpb.RegisterMetricsServiceServer(srv, metricsService{r: r})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	return r
}

type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *otlpGRPCReceiver
}

func (s traceService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	md, _ := metadata.FromIncomingContext(ctx)
	s.r.contentType = md.Get("content-type")
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				s.r.service = a.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			s.r.spans = append(s.r.spans, ss.Spans...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

type metricsService struct {
	colmetricpb.UnimplementedMetricsServiceServer
	r *otlpGRPCReceiver
}

func (s metricsService) Export(_ context.Context, req *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				s.r.metrics[m.Name] = true
			}
		}
	}
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

// TestOpenTelemetryGRPC: with OTEL_EXPORTER_OTLP_PROTOCOL=grpc the
// exporters speak OTLP over gRPC (to a real grpc-go server of the OTLP
// collector services): one reply's trace (the send's span, the prompt's under it, its
// model rounds) and the GenAI metrics arrive.
func TestOpenTelemetryGRPC(t *testing.T) {
	t.Parallel()
	rcv := startOTLPGRPCReceiver(t)
	m := startMain(t, map[string]string{
		"CONVO_DEMO_TOKENS_PER_SECOND": "5000",
		"OTEL_EXPORTER_OTLP_ENDPOINT":  "http://" + rcv.addr, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
	})
	if !m.telemetry.Traces || !m.telemetry.Metrics {
		t.Fatalf("telemetry: traces %v, metrics %v; want both", m.telemetry.Traces, m.telemetry.Metrics)
	}
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sent, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "hello over gRPC"}))
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
	// Close flushes the spans and metrics.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	byName := map[string][]*tracepb.Span{}
	for _, s := range rcv.spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	send, prompt, chat := byName["convo.v1.ConversationService/SendMessage"], byName["convo.prompt"], byName["chat demo"]
	// The demo model may call a tool first: one round or more.
	if len(send) != 1 || len(prompt) != 1 || len(chat) == 0 {
		t.Fatalf("spans over gRPC: %d SendMessage, %d convo.prompt, %d chat demo; want 1, 1, at least 1\n%s", len(send), len(prompt), len(chat), traceTree(rcv.spans))
	}
	if string(prompt[0].TraceId) != string(send[0].TraceId) || string(prompt[0].ParentSpanId) != string(send[0].SpanId) ||
		string(chat[0].ParentSpanId) != string(prompt[0].SpanId) {
		t.Errorf("not one trace send → prompt → chat:\n%s", traceTree(rcv.spans))
	}
	if rcv.service != "convo" {
		t.Errorf("service.name = %q, want convo", rcv.service)
	}
	if got := rcv.contentType; len(got) != 1 || got[0] != "application/grpc" {
		t.Errorf("content-type of the trace exports = %v, want application/grpc", got)
	}
	for _, name := range []string{"gen_ai.client.token.usage", "gen_ai.client.operation.duration", "convo.prompt.queue_wait", "rpc.server.call.duration"} {
		if !rcv.metrics[name] {
			t.Errorf("metric %s not exported over gRPC; got %v", name, rcv.metrics)
		}
	}
}
