// Package metrics holds convo's Prometheus wiring that belongs to no one
// package: the registry a server exposes at /metrics and the Connect
// interceptor that measures every RPC. The stream hub, the workers and the
// server's maintenance loops define their own metrics beside the code they
// measure; docs/operations.md lists them all.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry holding the Go runtime's and the
// process's metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves reg in the Prometheus exposition formats. A collector
// that fails (the database is away) is reported in the scrape, and the
// rest is still served.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
	})
}
