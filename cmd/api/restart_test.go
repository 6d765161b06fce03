package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testwait"
	"github.com/convo-dev/convo/pgembed"
)

// TestRepliesSurvivePostgresFaults restarts PostgreSQL (immediate
// shutdown, durable cluster), or terminates every backend of the server
// (pg_terminate_backend: 57P01), while 20 replies stream through the
// in-process workers' shared batches: every reply completes, and its text
// is what the same message gets without a fault, no character lost or
// doubled (a batch whose answer was lost is sent again and applied once).
//
// The same holds with the server's pools and its workers' behind PgBouncer
// in transaction mode (CONVO_DB_POOL_MODE=transaction; its listener
// direct): the pooler's server connections die with the fault, and the
// server's are then cut by PgBouncer.
func TestRepliesSurvivePostgresFaults(t *testing.T) {
	t.Parallel()
	restart := func(ctx context.Context, cluster *pgembed.Cluster, _ *pgxpool.Pool) error {
		return cluster.Restart(ctx)
	}
	terminate := func(ctx context.Context, _ *pgembed.Cluster, db *pgxpool.Pool) error {
		var n int
		err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&n)
		if err == nil && n < 3 {
			err = fmt.Errorf("terminated %d backends, want the server's pools and listener", n)
		}
		return err
	}
	for _, c := range []struct {
		name   string
		pooled bool
		fault  func(ctx context.Context, cluster *pgembed.Cluster, db *pgxpool.Pool) error
	}{
		{"PostgresRestarted", false, restart},
		{"BackendsTerminated", false, terminate},
		{"PostgresRestartedBehindPgBouncer", true, restart},
		{"BackendsTerminatedBehindPgBouncer", true, terminate},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testRepliesSurvive(t, c.pooled, c.fault)
		})
	}
}

// testRepliesSurvive runs 20 replies and fault in the middle of them,
// through PgBouncer when pooled.
func testRepliesSurvive(t *testing.T, pooled bool, fault func(ctx context.Context, cluster *pgembed.Cluster, db *pgxpool.Pool) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, err := pgembed.Start(ctx, pgembed.Options{
		DataDir: filepath.Join(tempDirFor(t, "postgres"), "pgdata"), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Stop(context.Background()) }) //nolint:errcheck
	if err := cluster.CreateDatabase(ctx, "convo"); err != nil {
		t.Fatal(err)
	}
	dsn := cluster.DSN("convo")
	m := NewMain()
	m.Stdout = io.Discard
	env := map[string]string{
		"DATABASE_URL": dsn, "CONVO_HTTP_ADDR": "127.0.0.1:0", "CONVO_LOG_LEVEL": "error", "CONVO_WORKERS": "20",
		// Slow enough that every reply is still running when the last
		// one starts, on a loaded machine too (at 100 tokens/s, under
		// make test's load, half had ended by then).
		"CONVO_DEMO_TOKENS_PER_SECOND": "25", "CONVO_MAX_ACTIVE_PROMPTS": "0", "CONVO_WRITE_RATE": "0",
	}
	if pooled {
		env["DATABASE_URL"] = pgtest.PgBouncer(t, dsn)[0]
		env["CONVO_DB_POOL_MODE"], env["CONVO_DIRECT_DATABASE_URL"] = "transaction", dsn
	}
	if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	db, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	send := func(i int) *convov1.SendMessageResponse {
		t.Helper()
		res, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: fmt.Sprintf("What is %d times 7?", i)}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg
	}
	// answers waits for the prompts to end and returns each reply's
	// text blocks, with the prompts' statuses.
	answers := func(sent []*convov1.SendMessageResponse) (texts, statuses []string) {
		t.Helper()
		for _, s := range sent {
			var status string
			testwait.Until(t, ctx, "the reply to end", func() bool {
				if err := db.QueryRow(ctx, `SELECT status FROM convo.prompts WHERE id = $1`, s.PromptId).Scan(&status); err != nil {
					return false
				}
				return status != "queued" && status != "running"
			})
			var text string
			if err := db.QueryRow(ctx, `SELECT string_agg(content, '|' ORDER BY position) FROM convo.blocks
				WHERE message_id = $1 AND block_type = 'text'`, s.AssistantMessageId).Scan(&text); err != nil {
				t.Fatal(err)
			}
			texts, statuses = append(texts, text), append(statuses, status)
		}
		return texts, statuses
	}

	// 20 replies in the shared batches of 20 workers (40 cost twice the CPU,
	// a tenth of the package's, and proved no more).
	const replies = 20
	var sent []*convov1.SendMessageResponse
	for i := range replies {
		sent = append(sent, send(i))
	}
	// Mid-reply: some text of every reply is written.
	testwait.Until(t, ctx, "every reply to stream", func() bool {
		var streaming int
		err := db.QueryRow(ctx, `SELECT count(DISTINCT prompt_id) FROM convo.events WHERE kind = 'blockDelta'`).Scan(&streaming)
		return err == nil && streaming == replies
	})
	var running int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM convo.prompts WHERE status = 'running'`).Scan(&running); err != nil || running < replies/2 {
		t.Fatalf("%d replies running before the fault (%v): the test would prove nothing", running, err)
	}
	if err := fault(ctx, cluster, db); err != nil {
		t.Fatal(err)
	}
	db.Reset()
	texts, statuses := answers(sent)

	// The same messages again, without a fault: the demo model answers a
	// message the same way every time.
	var again []*convov1.SendMessageResponse
	for i := range replies {
		again = append(again, send(i))
	}
	want, _ := answers(again)
	for i := range replies {
		if statuses[i] != "completed" {
			t.Errorf("reply %d across the fault: %s", i, statuses[i])
			continue
		}
		if texts[i] != want[i] {
			t.Errorf("reply %d across the fault differs from the same reply without it:\n got %q\nwant %q", i, clip(texts[i]), clip(want[i]))
		}
	}
}

// clip shortens s for a message.
func clip(s string) string {
	if len(s) > 200 {
		return s[:100] + " … " + s[len(s)-100:]
	}
	return strings.TrimSpace(s)
}
