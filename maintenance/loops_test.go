package maintenance_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/maintenance"
	"github.com/convo-dev/convo/postgres"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestSeveralProcessesReapOnce runs three reapers at once, as three
// processes would, over prompts whose workers died: each prompt is failed
// once, and the three counters add up to the prompts.
func TestSeveralProcessesReapOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.Pool(t)
	store := postgres.New(db)
	const prompts = 12
	for range prompts {
		res, err := store.SendMessage(ctx, conversation.SendMessageParams{
			OwnerID: "local", Text: "hello?", ModelConfigs: []json.RawMessage{json.RawMessage(`{}`)},
		})
		if err != nil {
			t.Fatal(err)
		}
		// A worker claims it for one second, starts it, and dies.
		if _, err := db.Exec(ctx, `SELECT prompt_id FROM convo.claim_prompt('dead', 1)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `SELECT convo.start_prompt($1)`, res.PromptIDs[0]); err != nil {
			t.Fatal(err)
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	var loops []*maintenance.Loops
	done := make(chan struct{}, 3)
	for range 3 {
		l := maintenance.New(maintenance.Options{Store: store, ReapEvery: 20 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		loops = append(loops, l)
		go func() { l.Run(runCtx); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		stop()
		for range loops {
			<-done
		}
	})

	reaped := func() float64 {
		var n float64
		for _, l := range loops {
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(l)
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range families {
				if f.GetName() == "convo_prompt_leases_expired_total" {
					n += f.GetMetric()[0].GetCounter().GetValue()
				}
			}
		}
		return n
	}
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for reaped() < prompts {
		select {
		case <-deadline:
			t.Fatalf("%v of %d prompts reaped after 20s", reaped(), prompts)
		case <-tick.C:
		}
	}
	var failed, events int
	if err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'failed'), count(*) FROM convo.prompts`).Scan(&failed, &events); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM convo.events WHERE kind = 'promptFailed'`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if failed != prompts || events != prompts || reaped() != prompts {
		t.Errorf("%d prompts failed, %d promptFailed events, %v counted; want %d of each", failed, events, reaped(), prompts)
	}
}
