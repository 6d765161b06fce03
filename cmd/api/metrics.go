package main

import (
	"context"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convo-dev/convo/metrics"
	"github.com/convo-dev/convo/postgres"
)

// serverMetrics is what the server exports at /metrics: the Go runtime,
// the RPC interceptor, the hub, the in-process workers, the prompt queue
// and the maintenance loops. docs/operations.md lists every metric.
type serverMetrics struct {
	registry *prometheus.Registry
	rpc      *metrics.RPC

	leasesExpired    prometheus.Counter
	promptsCompacted prometheus.Counter
	eventsCompacted  prometheus.Counter
}

func newServerMetrics() *serverMetrics {
	reg := metrics.NewRegistry()
	m := &serverMetrics{
		registry: reg,
		rpc:      metrics.NewRPC(reg),
		leasesExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_prompt_leases_expired_total",
			Help: "Running prompts this server failed because their worker stopped heartbeating.",
		}),
		promptsCompacted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_compaction_prompts_total",
			Help: "Finished prompts whose delta events this server compacted.",
		}),
		eventsCompacted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_compaction_events_removed_total",
			Help: "Event rows removed by merging delta events.",
		}),
	}
	reg.MustRegister(m.leasesExpired, m.promptsCompacted, m.eventsCompacted)
	return m
}

// queueCollector reads the prompt queue from the database at each scrape.
type queueCollector struct{ store *postgres.Store }

var (
	queuedDesc = prometheus.NewDesc("convo_prompts_queued",
		"Prompts waiting for a worker (the whole database).", nil, nil)
	oldestQueuedDesc = prometheus.NewDesc("convo_prompts_queued_oldest_seconds",
		"How long the oldest queued prompt has waited; 0 when none waits.", nil, nil)
	runningDesc = prometheus.NewDesc("convo_prompts_running",
		"Prompts a worker is running (the whole database).", nil, nil)
)

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queuedDesc
	ch <- oldestQueuedDesc
	ch <- runningDesc
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.store.PromptQueueStats(ctx)
	if err != nil {
		for _, d := range []*prometheus.Desc{queuedDesc, oldestQueuedDesc, runningDesc} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
		return
	}
	ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(st.Queued))
	ch <- prometheus.MustNewConstMetric(oldestQueuedDesc, prometheus.GaugeValue, st.OldestQueued.Seconds())
	ch <- prometheus.MustNewConstMetric(runningDesc, prometheus.GaugeValue, float64(st.Running))
}

// adminRoutes is the admin address's handler (CONVO_ADMIN_ADDR): metrics
// and the Go profiler, for operators only.
func (m *Main) adminRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(m.metrics.registry))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
