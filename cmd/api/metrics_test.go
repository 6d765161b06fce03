package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// scrape is one read of /metrics.
type scrape map[string]*dto.MetricFamily

func scrapeMetrics(t *testing.T, url string) scrape {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// value is the value of the series name{labels} (a counter's or gauge's
// value, a histogram's count); 0 when absent.
func (s scrape) value(name string, labels ...string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return 0
}

// TestMetricsMove scrapes /metrics before, during and after a reply and
// checks that every part of the server counted what it did.
func TestMetricsMove(t *testing.T) {
	t.Parallel()
	// Compaction 3 s after the reply ends: soon enough to be counted
	// below, late enough that the stream (which a loaded machine may hold
	// back) reads the reply's deltas before they are merged, rather than
	// being told to resume.
	// 200 tokens a second: each block's text comes in several deltas,
	// which compaction merges (at 2000 a block's text could all come in
	// one batch's delta, leaving compaction nothing to remove).
	m := startMain(t, map[string]string{"CONVO_DEMO_TOKENS_PER_SECOND": "200", "CONVO_COMPACT_AFTER": "3s", "CONVO_PUBLIC_METRICS": "true"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	const send = "/convo.v1.ConversationService/SendMessage"
	const streamProc = "/convo.v1.ConversationService/StreamConversation"

	// The listener connects in the background after Run returns.
	var before scrape
	for before = scrapeMetrics(t, m.URL()); before.value("convo_stream_feed_connects_total") < 1; before = scrapeMetrics(t, m.URL()) {
		if ctx.Err() != nil {
			t.Fatal("convo_stream_feed_connects_total stayed 0: the listener did not connect, or was not counted")
		}
		time.Sleep(20 * time.Millisecond)
	}

	sent, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "What is 6 times 7?"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: " "})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("blank message: %v", err)
	}
	stream, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: sent.Msg.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	during := scrapeMetrics(t, m.URL())
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"convo_stream_subscriptions", nil, 1},
		{"convo_stream_conversations", nil, 1},
		{"convo_rpc_streams_open", []string{"procedure", streamProc}, 1},
	} {
		if got := during.value(c.name, c.labels...); got != c.want {
			t.Errorf("with one stream open, %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for stream.Receive() {
		if stream.Msg().GetEvent().GetPromptCompleted() != nil {
			break
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	// GetConversation reads through the snapshot reader too.
	if _, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.Msg.ConversationId})); err != nil {
		t.Fatal(err)
	}

	// The worker records its outcome just after completing the prompt,
	// and the compactor runs every second.
	var after scrape
	deadline := time.Now().Add(45 * time.Second)
	for {
		after = scrapeMetrics(t, m.URL())
		if after.value("convo_worker_prompts_total", "outcome", "completed") > 0 &&
			after.value("convo_compaction_events_removed_total") > 0 &&
			after.value("convo_rpc_streams_open", "procedure", streamProc) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	grew := func(name string, labels ...string) {
		t.Helper()
		if b, a := before.value(name, labels...), after.value(name, labels...); a <= b {
			t.Errorf("%s%v did not grow: %v before, %v after", name, labels, b, a)
		}
	}
	grew("convo_rpc_calls_total", "procedure", send, "code", "ok")
	grew("convo_rpc_calls_total", "procedure", send, "code", "invalid_argument")
	grew("convo_rpc_duration_seconds", "procedure", send)
	grew("convo_rpc_calls_total", "procedure", streamProc, "code", "canceled")
	grew("convo_rpc_stream_duration_seconds", "procedure", streamProc)
	grew("convo_stream_events_published_total")
	grew("convo_stream_events_delivered_total")
	grew("convo_stream_delivery_lag_seconds")
	grew("convo_stream_log_reads_total")
	grew("convo_snapshot_reads_total")
	grew("convo_sends_total")
	grew("convo_send_groups_total")
	if b, a := before.value("convo_snapshot_requests_total"), after.value("convo_snapshot_requests_total"); a < b+2 {
		t.Errorf("convo_snapshot_requests_total went from %v to %v; want the stream's snapshot and GetConversation's read counted", b, a)
	}
	grew("convo_worker_claims_total")
	grew("convo_worker_prompts_total", "outcome", "completed")
	grew("convo_worker_prompt_duration_seconds", "outcome", "completed")
	grew("convo_compaction_prompts_total")
	grew("convo_compaction_events_removed_total")
	if got := after.value("convo_stream_subscriptions"); got != 0 {
		t.Errorf("convo_stream_subscriptions = %v after the stream closed, want 0", got)
	}
	if got := after.value("convo_prompts_queued"); got != 0 {
		t.Errorf("convo_prompts_queued = %v with nothing queued", got)
	}
	if _, ok := after["go_goroutines"]; !ok {
		t.Error("the Go runtime's metrics are missing")
	}
}

// TestQueueAndLeaseMetrics checks the prompt queue gauges and the lease
// reaper's counter, with no in-process worker: a prompt waits, is claimed
// by a "worker" that then goes silent, and is failed by the reaper.
func TestQueueAndLeaseMetrics(t *testing.T) {
	t.Parallel()
	m := startMain(t, map[string]string{"CONVO_WORKERS": "0", "CONVO_PUBLIC_METRICS": "true"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	sent, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "anyone?"}))
	if err != nil {
		t.Fatal(err)
	}
	queued := scrapeMetrics(t, m.URL())
	if got := queued.value("convo_prompts_queued"); got != 1 {
		t.Errorf("convo_prompts_queued = %v, want 1", got)
	}
	if got := queued.value("convo_prompts_queued_oldest_seconds"); got <= 0 {
		t.Errorf("convo_prompts_queued_oldest_seconds = %v, want > 0", got)
	}

	conn, err := pgx.Connect(ctx, m.Config.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT prompt_id FROM convo.claim_prompt('silent', 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT convo.start_prompt($1)`, sent.Msg.PromptId); err != nil {
		t.Fatal(err)
	}
	running := scrapeMetrics(t, m.URL())
	if got := running.value("convo_prompts_running"); got != 1 || running.value("convo_prompts_queued") != 0 {
		t.Errorf("after the claim: running %v, queued %v; want 1 and 0", got, running.value("convo_prompts_queued"))
	}
	// The reaper looks every 5 s; the lease lasts 1 s.
	deadline := time.Now().Add(45 * time.Second)
	for scrapeMetrics(t, m.URL()).value("convo_prompt_leases_expired_total") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("convo_prompt_leases_expired_total did not move after the lease expired")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := scrapeMetrics(t, m.URL()).value("convo_prompts_running"); got != 0 {
		t.Errorf("convo_prompts_running = %v after the reaper failed the prompt", got)
	}
}

// TestPublicMetricsOnlyWhenAsked checks that the public address serves
// /metrics only with CONVO_PUBLIC_METRICS=true, also beside an admin
// address.
func TestPublicMetricsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	for name, env := range map[string]map[string]string{
		"Default":            {},
		"FalseSaysNo":        {"CONVO_PUBLIC_METRICS": "false"},
		"AskedWithAdminAddr": {"CONVO_PUBLIC_METRICS": "true", "CONVO_ADMIN_ADDR": "127.0.0.1:0"},
		"AskedWithoutAdmin":  {"CONVO_PUBLIC_METRICS": "true"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env["CONVO_WORKERS"] = "0"
			m := startMain(t, env)
			resp, err := http.Get(m.URL() + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			served := resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain")
			if want := env["CONVO_PUBLIC_METRICS"] == "true"; served != want {
				t.Errorf("public /metrics served = %v (%s, %s); want %v", served, resp.Status, resp.Header.Get("Content-Type"), want)
			}
			if env["CONVO_ADMIN_ADDR"] != "" && scrapeMetrics(t, "http://"+m.adminAddr())["convo_stream_subscriptions"] == nil {
				t.Error("the admin address does not serve convo's metrics")
			}
		})
	}
}

// TestAdminAddress moves /metrics to the admin address, beside pprof.
func TestAdminAddress(t *testing.T) {
	t.Parallel()
	m := startMain(t, map[string]string{"CONVO_WORKERS": "0", "CONVO_ADMIN_ADDR": "127.0.0.1:0"})
	admin := "http://" + m.adminAddr()
	if got := scrapeMetrics(t, admin); got["convo_stream_subscriptions"] == nil {
		t.Error("the admin address does not serve convo's metrics")
	}
	resp, err := http.Get(admin + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("pprof on the admin address: %s", resp.Status)
	}
	resp, err = http.Get(m.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("/metrics is still served on the public address (%s)", resp.Header.Get("Content-Type"))
	}
}
