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
	// The committer's batches (convo.write_batch calls).
	batches       *prometheus.CounterVec
	batchOps      prometheus.Histogram
	batchDuration prometheus.Histogram
	// The process lease's heartbeats (convo.worker_heartbeat calls).
	heartbeats *prometheus.CounterVec
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
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "convo_worker_batches_total",
			Help: "Batches of writes (convo.write_batch calls, one transaction each) this process wrote, by result: ok or error (every reply in it failed).",
		}, []string{"result"}),
		batchOps: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "convo_worker_batch_ops",
			Help:    "Ops (worker API calls) per batch.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}),
		batchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "convo_worker_batch_duration_seconds",
			Help:    "How long one batch took to write, retries included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}),
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "convo_worker_heartbeats_total",
			Help: "Heartbeats of this process's lease (convo.worker_heartbeat calls, one per interval however many prompts run), by result: ok, expired (the lease had run out: the replies in flight stopped) or error.",
		}, []string{"result"}),
	}
}

// Describe implements prometheus.Collector.
func (p *Pool) Describe(ch chan<- *prometheus.Desc) {
	ch <- inFlightDesc
	p.metrics.claims.Describe(ch)
	p.metrics.outcomes.Describe(ch)
	p.metrics.duration.Describe(ch)
	p.metrics.batches.Describe(ch)
	p.metrics.batchOps.Describe(ch)
	p.metrics.batchDuration.Describe(ch)
	p.metrics.heartbeats.Describe(ch)
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
	p.metrics.batches.Collect(ch)
	p.metrics.batchOps.Collect(ch)
	p.metrics.batchDuration.Collect(ch)
	p.metrics.heartbeats.Collect(ch)
}

func (m *poolMetrics) settled(outcome Outcome, took time.Duration) {
	m.outcomes.WithLabelValues(string(outcome)).Inc()
	m.duration.WithLabelValues(string(outcome)).Observe(took.Seconds())
}

func (m *poolMetrics) batchWritten(ops int, took time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.batches.WithLabelValues(result).Inc()
	m.batchOps.Observe(float64(ops))
	m.batchDuration.Observe(took.Seconds())
}
