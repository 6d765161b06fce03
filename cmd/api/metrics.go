package main

import (
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
