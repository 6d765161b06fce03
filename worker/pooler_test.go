package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/worker/demo"

	. "github.com/convo-dev/convo/worker"
)

// TestStartRefusesToListenThroughPooler: workers whose pool is set up for
// a transaction pooler (postgres.ForTransactionPooler) and that are given
// no listener of their own are refused at Start, naming the setting of
// the direct URL, rather than LISTEN through the pooler and hear nothing.
func TestStartRefusesToListenThroughPooler(t *testing.T) {
	t.Parallel()
	pool := pgtest.PoolWith(t, postgres.ForTransactionPooler)
	models := NewModels("demo")
	models.Register("demo", demo.NewModel(demo.Options{TokensPerSecond: -1}), "")
	p, err := Start(context.Background(), pool, Config{Workers: 1, Models: models, Tools: demo.Tools()})
	if err == nil {
		p.Stop(context.Background()) //nolint:errcheck // the test has failed
		t.Fatal("Start through a transaction-pooled pool without a listener succeeded; want a refusal")
	}
	if !strings.Contains(err.Error(), "CONVO_DIRECT_DATABASE_URL") || !strings.Contains(err.Error(), "LISTEN") {
		t.Errorf("Start: %v; want an error that says LISTEN needs CONVO_DIRECT_DATABASE_URL", err)
	}
}
