package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/convo-dev/convo/internal/pgtest"
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
