package worker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// poolMetrics counts what a pool's workers do. The Pool is a
// prometheus.Collector (Describe, Collect): register it to export them.
type poolMetrics struct {
	claims   prometheus.Counter
	outcomes *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

var inFlightDesc = prometheus.NewDesc("convo_worker_prompts_in_flight",
	"Prompts this process's workers are running now.", nil, nil)

func newPoolMetrics() poolMetrics {
	return poolMetrics{
		claims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_worker_claims_total",
			Help: "Prompts claimed by this process's workers.",
		}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "convo_worker_prompts_total",
			Help: "Prompts this process's workers left, by outcome: completed, failed, cancelled, or stopped (no longer theirs: lease lost or shutdown).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "convo_worker_prompt_duration_seconds",
			Help:    "From claim to settlement of a prompt, by outcome.",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600},
		}, []string{"outcome"}),
	}
}

// Describe implements prometheus.Collector.
func (p *Pool) Describe(ch chan<- *prometheus.Desc) {
	ch <- inFlightDesc
	p.metrics.claims.Describe(ch)
	p.metrics.outcomes.Describe(ch)
	p.metrics.duration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (p *Pool) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	inFlight := len(p.running)
	p.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(inFlight))
	p.metrics.claims.Collect(ch)
	p.metrics.outcomes.Collect(ch)
	p.metrics.duration.Collect(ch)
}

func (m *poolMetrics) settled(outcome Outcome, took time.Duration) {
	m.outcomes.WithLabelValues(string(outcome)).Inc()
	m.duration.WithLabelValues(string(outcome)).Observe(took.Seconds())
}
