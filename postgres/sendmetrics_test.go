package postgres_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres"
)

// TestSendCollector: the collector reports what the store's sends did,
// as SendStats counts it: three sends written, one refused as malformed
// (not an overload), nothing pending once they answered.
func TestSendCollector(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	for i := range 3 {
		if _, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: "metrics", Text: "hello", ModelConfigs: demoConfigs()}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if _, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: "metrics", Text: "", ModelConfigs: demoConfigs()}); err == nil {
		t.Fatal("an empty send was accepted")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(postgres.SendCollector{Store: tb.store})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		m := f.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			got[f.GetName()] = m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			got[f.GetName()] = m.GetGauge().GetValue()
		}
	}
	st := tb.store.SendStats()
	if got["convo_sends_total"] != 3 || st.Sent != 3 {
		t.Errorf("convo_sends_total = %v (SendStats %d), want 3", got["convo_sends_total"], st.Sent)
	}
	if g := got["convo_send_groups_total"]; g < 3 || g != float64(st.Groups) {
		t.Errorf("convo_send_groups_total = %v (SendStats %d), want the groups counted, at least one per send made one after the other", g, st.Groups)
	}
	if got["convo_sends_overloaded_total"] != 0 {
		t.Errorf("convo_sends_overloaded_total = %v, want 0: a malformed send is not an overload", got["convo_sends_overloaded_total"])
	}
	if v, ok := got["convo_sends_pending"]; !ok || v != 0 {
		t.Errorf("convo_sends_pending = %v (reported: %v), want 0", v, ok)
	}
}
