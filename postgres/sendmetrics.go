package postgres

import "github.com/prometheus/client_golang/prometheus"

// SendCollector is a prometheus.Collector of a Store's SendStats, read at
// each scrape: convo_send_groups_total, convo_sends_total,
// convo_sends_overloaded_total and convo_sends_pending. Sends per group
// (sends / groups) says how much the grouping saves under load; pending
// against CONVO_MAX_PENDING_SENDS says how near sends are to being refused.
type SendCollector struct{ Store *Store }

var _ prometheus.Collector = SendCollector{}

var (
	sendGroupsDesc = prometheus.NewDesc("convo_send_groups_total",
		"Transactions that wrote sends (SendMessage and the protocols' sends), each holding one or more.", nil, nil)
	sendsDesc = prometheus.NewDesc("convo_sends_total",
		"Sends written (each in some group).", nil, nil)
	sendsOverloadedDesc = prometheus.NewDesc("convo_sends_overloaded_total",
		"Sends refused at once, writing nothing, because the maximum of pending sends waited already.", nil, nil)
	sendsPendingDesc = prometheus.NewDesc("convo_sends_pending",
		"Sends waiting for a group now.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c SendCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sendGroupsDesc
	ch <- sendsDesc
	ch <- sendsOverloadedDesc
	ch <- sendsPendingDesc
}

// Collect implements prometheus.Collector.
func (c SendCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.Store.SendStats()
	ch <- prometheus.MustNewConstMetric(sendGroupsDesc, prometheus.CounterValue, float64(st.Groups))
	ch <- prometheus.MustNewConstMetric(sendsDesc, prometheus.CounterValue, float64(st.Sent))
	ch <- prometheus.MustNewConstMetric(sendsOverloadedDesc, prometheus.CounterValue, float64(st.Overloaded))
	ch <- prometheus.MustNewConstMetric(sendsPendingDesc, prometheus.GaugeValue, float64(st.Pending))
}
