package stream

import (
	"time"

	"github.com/convo-dev/convo/conversation"

	"github.com/prometheus/client_golang/prometheus"
)

// hubMetrics counts what a hub does. The hub is a prometheus.Collector
// (Describe, Collect): register it to export them.
type hubMetrics struct {
	published prometheus.Counter
	delivered prometheus.Counter
	reads     prometheus.Counter
	resyncs   prometheus.Counter
	cutOff    prometheus.Counter
	lag       prometheus.Histogram
}

var (
	subscriptionsDesc = prometheus.NewDesc("convo_stream_subscriptions",
		"Open subscriptions (StreamConversation, SSE and AG-UI streams) on this server.", nil, nil)
	conversationsDesc = prometheus.NewDesc("convo_stream_conversations",
		"Conversations with at least one subscriber on this server.", nil, nil)
)

func newHubMetrics() hubMetrics {
	return hubMetrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_stream_events_published_total",
			Help: "Events fanned out to the subscribers of their conversation (each event once).",
		}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_stream_events_delivered_total",
			Help: "Events queued to subscribers (one per event and subscriber).",
		}),
		reads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_stream_log_reads_total",
			Help: "Reads of the event log by the hub: one per wake-up, for every conversation with news.",
		}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_stream_feed_connects_total",
			Help: "Connections made by the feed (LISTEN or replication); each is followed by a catch-up read of every followed conversation.",
		}),
		cutOff: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "convo_stream_subscribers_cut_off_total",
			Help: "Subscribers ended because their queue overflowed (the client read too slowly); they resume.",
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "convo_stream_delivery_lag_seconds",
			Help:    "From an event's insert (its created_at, the database's clock) to its fan-out to subscribers.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
}

func (m *hubMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.published, m.delivered, m.reads, m.resyncs, m.cutOff, m.lag}
}

// Describe implements prometheus.Collector.
func (h *Hub[T]) Describe(ch chan<- *prometheus.Desc) {
	ch <- subscriptionsDesc
	ch <- conversationsDesc
	for _, c := range h.metrics.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (h *Hub[T]) Collect(ch chan<- prometheus.Metric) {
	st := h.Stats()
	ch <- prometheus.MustNewConstMetric(subscriptionsDesc, prometheus.GaugeValue, float64(st.Subscribers))
	ch <- prometheus.MustNewConstMetric(conversationsDesc, prometheus.GaugeValue, float64(st.Topics))
	for _, c := range h.metrics.collectors() {
		c.Collect(ch)
	}
}

// fannedOut records an event queued to n subscribers.
func (m *hubMetrics) fannedOut(e conversation.Event, n int, now time.Time) {
	if n == 0 {
		return
	}
	m.published.Inc()
	m.delivered.Add(float64(n))
	m.lag.Observe(now.Sub(e.CreatedAt).Seconds())
}
