package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testwait"
	"github.com/convo-dev/convo/pgembed"
	"github.com/convo-dev/convo/postgres"
)

// TestPoolsMustFitMaxConnections starts servers whose pools cannot fit in
// the database's max_connections: each is refused at start, with a
// message naming the setting to lower; pools that fit start.
func TestPoolsMustFitMaxConnections(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	for _, tc := range []struct {
		name    string
		env     map[string]string
		refused string // "": starts
	}{
		{"APIPoolTooBig", map[string]string{"CONVO_DB_MAX_CONNS": "100000"}, "CONVO_DB_MAX_CONNS"},
		{"SnapshotPoolTooBig", map[string]string{"CONVO_SNAPSHOT_CONNS": "100000"}, "CONVO_SNAPSHOT_CONNS"},
		{"WorkerPoolTooBig", map[string]string{"CONVO_WORKERS": "2", "CONVO_WORKER_DB_CONNS": "100000"}, "CONVO_WORKER_DB_CONNS"},
		// Thousands of replies at once need no more connections.
		{"ManyWorkersFit", map[string]string{"CONVO_WORKERS": "5000"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := NewMain()
			m.Stdout = io.Discard
			env := map[string]string{"DATABASE_URL": dsn, "CONVO_HTTP_ADDR": "127.0.0.1:0", "CONVO_LOG_LEVEL": "error", "CONVO_WORKERS": "0"}
			for k, v := range tc.env {
				env[k] = v
			}
			if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
				t.Fatal(err)
			}
			err := m.Run(context.Background())
			defer m.Close()
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, postgres.ErrTooManyConnections) || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "max_connections") {
				t.Fatalf("start: %v; want it refused, naming %s and max_connections", err, tc.refused)
			}
			if m.workers != nil || m.listener != nil {
				t.Error("a refused server started its workers or its listener")
			}
		})
	}
}

// TestManyWorkersFewConnections runs 300 in-process workers against a
// PostgreSQL allowing 30 connections and sends 300 messages at once:
// every request succeeds and every reply completes (before, the pools
// were sized by the workers, 608 connections, and requests failed with
// "too many clients").
func TestManyWorkersFewConnections(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, err := pgembed.Start(ctx, pgembed.Options{
		DataDir: filepath.Join(tempDirFor(t, "postgres"), "pgdata"), Fast: true, MaxConnections: 30,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Stop(context.Background()) }) //nolint:errcheck
	if err := cluster.CreateDatabase(ctx, "convo"); err != nil {
		t.Fatal(err)
	}
	m := NewMain()
	m.Stdout = io.Discard
	env := map[string]string{
		"DATABASE_URL": cluster.DSN("convo"), "CONVO_HTTP_ADDR": "127.0.0.1:0", "CONVO_LOG_LEVEL": "error",
		"CONVO_WORKERS": "300", "CONVO_DEMO_TOKENS_PER_SECOND": "200", "CONVO_MAX_ACTIVE_PROMPTS": "0", "CONVO_WRITE_RATE": "0",
	}
	if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())

	const replies = 300
	prompts := make([]string, replies)
	errs := make([]error, replies)
	var wg sync.WaitGroup
	for i := range replies {
		wg.Go(func() {
			res, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: fmt.Sprintf("question %d", i)}))
			if err != nil {
				errs[i] = err
				return
			}
			prompts[i] = res.Msg.PromptId
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("SendMessage failed: %v", err)
	}
	db, err := pgxpool.New(ctx, cluster.DSN("convo"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testwait.Until(t, ctx, "every reply to end", func() bool {
		var open int
		err := db.QueryRow(ctx, `SELECT count(*) FROM convo.prompts WHERE status IN ('queued', 'running')`).Scan(&open)
		return err == nil && open == 0
	})
	var completed int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM convo.prompts WHERE status = 'completed' AND id = ANY($1::uuid[])`, prompts).Scan(&completed); err != nil {
		t.Fatal(err)
	}
	if completed != replies {
		t.Errorf("%d of %d replies completed", completed, replies)
	}
}
