package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/internal/pgtest"
)

// TestMigrateAtStartOff starts a server with CONVO_MIGRATE_AT_START=false
// on an empty database: it refuses to start, naming the setting and
// --migrate, and creates nothing; after --migrate it starts.
func TestMigrateAtStartOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	name := fmt.Sprintf("migrate_at_start_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)") }) //nolint:errcheck
	cfg := admin.Config()
	empty := fmt.Sprintf("host=%s port=%d user=%s password='%s' dbname=%s", cfg.Host, cfg.Port, cfg.User, cfg.Password, name)
	env := map[string]string{"DATABASE_URL": empty, "CONVO_HTTP_ADDR": "127.0.0.1:0", "CONVO_WORKERS": "0", "CONVO_MIGRATE_AT_START": "false"}
	start := func() (*Main, error) {
		m := NewMain()
		m.Stdout = io.Discard
		m.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
			t.Fatal(err)
		}
		err := m.Run(ctx)
		t.Cleanup(func() { m.Close() })
		return m, err
	}

	_, err = start()
	if err == nil || !strings.Contains(err.Error(), "CONVO_MIGRATE_AT_START is false") ||
		!strings.Contains(err.Error(), "at migration 0") || !strings.Contains(err.Error(), "--migrate") {
		t.Fatalf("start on an empty database without migrations: %v; want a refusal naming CONVO_MIGRATE_AT_START and --migrate", err)
	}
	conn, err := pgx.Connect(ctx, empty)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var schema bool
	if err := conn.QueryRow(ctx, "SELECT to_regnamespace('convo') IS NOT NULL").Scan(&schema); err != nil || schema {
		t.Fatalf("the refused start created the schema convo (%v)", err)
	}

	m := NewMain()
	m.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := m.ParseFlags([]string{"--migrate"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := start(); err != nil {
		t.Fatalf("start after --migrate: %v", err)
	}
}
