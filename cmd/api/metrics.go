package main

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convo-dev/convo/metrics"
)

// serverMetrics is what the server exports at /metrics: the Go runtime,
// the RPC interceptor, the hub, the in-process workers, and the prompt
// queue and maintenance loops (package maintenance). docs/operations.md lists every metric.
type serverMetrics struct {
	registry *prometheus.Registry
	rpc      *metrics.RPC
}

func newServerMetrics() *serverMetrics {
	reg := metrics.NewRegistry()
	return &serverMetrics{registry: reg, rpc: metrics.NewRPC(reg)}
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
