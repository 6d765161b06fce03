package maintenance

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convo-dev/convo/postgres"
)

// QueueCollector reads the prompt queue from the database at each scrape:
// convo_prompts_queued, convo_prompts_queued_oldest_seconds and
// convo_prompts_running, for the whole database. A failed read reports
// the three as invalid metrics, so the scrape says why.
type QueueCollector struct{ Store *postgres.Store }

var _ prometheus.Collector = QueueCollector{}

var (
	queuedDesc = prometheus.NewDesc("convo_prompts_queued",
		"Prompts waiting for a worker (the whole database).", nil, nil)
	oldestQueuedDesc = prometheus.NewDesc("convo_prompts_queued_oldest_seconds",
		"How long the oldest queued prompt has waited; 0 when none waits.", nil, nil)
	runningDesc = prometheus.NewDesc("convo_prompts_running",
		"Prompts a worker is running (the whole database).", nil, nil)
)

// Describe implements prometheus.Collector.
func (c QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queuedDesc
	ch <- oldestQueuedDesc
	ch <- runningDesc
}

// Collect implements prometheus.Collector.
func (c QueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.Store.PromptQueueStats(ctx)
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
