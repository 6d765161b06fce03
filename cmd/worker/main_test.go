package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testwait"
	"github.com/convo-dev/convo/postgres"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestParseFlags(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://x/db", "CONVO_WORKERS": "4", "CONVO_OPENAI_API_KEY": "sk-1", "CONVO_COMPACT_AFTER": "10m"}
	m := NewMain()
	if err := m.ParseFlags([]string{"--workers", "2", "--lease-seconds", "9", "--openai-model", "gpt-x"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	w := m.Config.Worker
	if m.Config.DatabaseURL != "postgres://x/db" || w.Workers != 2 || w.LeaseSeconds != 9 || w.OpenAIAPIKey != "sk-1" || w.OpenAIModel != "gpt-x" ||
		m.Config.CompactAfter != 10*time.Minute {
		t.Errorf("config %+v", m.Config)
	}

	err := NewMain().ParseFlags(nil, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Errorf("without a database: %v", err)
	}
	err = NewMain().ParseFlags([]string{"--database-url", "postgres://x/db"}, func(k string) string {
		return map[string]string{"CONVO_BATCH_INTERVAL": "soon"}[k]
	})
	if err == nil || !strings.Contains(err.Error(), "CONVO_BATCH_INTERVAL") {
		t.Errorf("bad duration: %v", err)
	}
	for _, tc := range []struct {
		env  string
		args []string
	}{{env: "-1s"}, {env: "later"}, {args: []string{"--compact-after", "-5m"}}} {
		err = NewMain().ParseFlags(append([]string{"--database-url", "postgres://x/db"}, tc.args...), func(k string) string {
			return map[string]string{"CONVO_COMPACT_AFTER": tc.env}[k]
		})
		if err == nil || !strings.Contains(err.Error(), "compact") && !strings.Contains(err.Error(), "COMPACT") {
			t.Errorf("compact after %q %v: %v", tc.env, tc.args, err)
		}
	}
}

// TestWorkerOnlyProcessExpiresDeadLease runs cmd/worker with no workers
// at all, beside a prompt whose worker died mid-reply: the process's lease
// reaper alone fails it, with no API server running.
func TestWorkerOnlyProcessExpiresDeadLease(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	db, store := openStore(t, dsn)
	res := send(t, store, "hello?")
	promptID := res.PromptIDs[0]
	// A worker claims the prompt for one second, starts it, and dies.
	if _, err := db.Exec(ctx, `SELECT prompt_id FROM convo.claim_prompt('dead-worker', 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `SELECT convo.start_prompt($1)`, promptID); err != nil {
		t.Fatal(err)
	}

	m := NewMain()
	m.reapEvery = 50 * time.Millisecond
	run(t, m, "--database-url", dsn, "--workers", "0")
	t.Cleanup(func() { m.Close() })

	var status string
	var errText *string
	testwait.For(t, "the worker process to fail the prompt whose lease expired", func() bool {
		if err := db.QueryRow(ctx, `SELECT status, error FROM convo.prompts WHERE id = $1`, promptID).Scan(&status, &errText); err != nil {
			t.Fatal(err)
		}
		return status != "running"
	})
	if status != "failed" || errText == nil || !strings.Contains(*errText, "lease expired: worker dead-worker stopped heartbeating") {
		t.Fatalf("prompt %s, error %v; want failed for its expired lease", status, errText)
	}
	st, err := store.State(ctx, "local", res.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Messages[1].Status; got != conversation.MessageFailed {
		t.Errorf("assistant message %s, want failed", got)
	}
}

// TestRun drives the production wiring: the worker answers a message,
// its admin address serves the worker's, the queue's and the loops'
// metrics and the profiler, and it stops cleanly.
func TestRun(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	m := NewMain()
	run(t, m, "--database-url", dsn, "--demo-tokens-per-second", "-1", "--admin-addr", "127.0.0.1:0")
	closed := false
	t.Cleanup(func() {
		if !closed {
			m.Close()
		}
	})

	_, store := openStore(t, dsn)
	res := send(t, store, "What is 3 * 3?")
	testwait.For(t, "the reply to complete", func() bool {
		st, err := store.State(context.Background(), "local", res.ConversationID)
		if err != nil {
			t.Fatal(err)
		}
		return st.Messages[1].Status == conversation.MessageCompleted
	})

	admin := "http://" + m.admin.Addr()
	var got map[string]*dto.MetricFamily
	// The pool counts a prompt once the worker has settled it, just after
	// the message completes.
	testwait.For(t, "the completed prompt in /metrics", func() bool {
		got = scrape(t, admin+"/metrics")
		return counter(got, "convo_worker_prompts_total", "outcome", "completed") == 1
	})
	if n := counter(got, "convo_worker_claims_total"); n != 1 {
		t.Errorf("convo_worker_claims_total = %v, want 1", n)
	}
	for _, name := range []string{"convo_prompts_queued", "convo_prompt_leases_expired_total", "convo_compaction_prompts_total", "go_goroutines"} {
		if got[name] == nil {
			t.Errorf("/metrics has no %s", name)
		}
	}
	resp, err := http.Get(admin + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("pprof on the admin address: %s", resp.Status)
	}

	if err := m.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	closed = true
	if resp, err := http.Get(admin + "/metrics"); err == nil {
		resp.Body.Close()
		t.Errorf("the admin address still answers after Close: %s", resp.Status)
	}
}

// scrape reads and parses the metrics at url.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return families
}

// counter is the value of the counter name with the label pair (name,
// value), if given; 0 when absent.
func counter(families map[string]*dto.MetricFamily, name string, label ...string) float64 {
	f := families[name]
	if f == nil {
		return 0
	}
	for _, m := range f.GetMetric() {
		if len(label) == 2 {
			match := false
			for _, l := range m.GetLabel() {
				match = match || l.GetName() == label[0] && l.GetValue() == label[1]
			}
			if !match {
				continue
			}
		}
		return m.GetCounter().GetValue()
	}
	return 0
}

// run parses args into m, quiet, and runs it; the caller closes it.
func run(t *testing.T, m *Main, args ...string) {
	t.Helper()
	m.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := m.ParseFlags(args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		m.Close()
		t.Fatal(err)
	}
}

// openStore connects to the test's database, closed when the test ends.
func openStore(t *testing.T, dsn string) (*pgxpool.Pool, *postgres.Store) {
	t.Helper()
	db, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db, postgres.New(db)
}

// send sends text as the user "local", queueing one prompt.
func send(t *testing.T, store *postgres.Store, text string) conversation.SendMessageResult {
	t.Helper()
	res, err := store.SendMessage(context.Background(), conversation.SendMessageParams{
		OwnerID: "local", Text: text, ModelConfigs: []json.RawMessage{json.RawMessage(`{}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
