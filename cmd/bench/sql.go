package main

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The bench's own statements, which are not convo's (those are in
// db/queries/tests, called through package apiq): the baseline of the throughput
// measurement, clean-up, and reading settings.

// The baseline is the least a NOTIFY-based design must do per delta: one
// event row, with the event log's shape and primary key, and its
// notification. Its table lives outside the convo schema and is dropped
// when the bench cleans up.
const (
	baselineChannel   = "convo_bench_baseline"
	createBaselineSQL = `CREATE TABLE IF NOT EXISTS public.convo_bench_events (
    conversation_id uuid        NOT NULL,
    seq             bigint      NOT NULL,
    kind            text        NOT NULL,
    payload         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (conversation_id, seq)
)`
	dropBaselineSQL   = `DROP TABLE IF EXISTS public.convo_bench_events`
	insertBaselineSQL = `INSERT INTO public.convo_bench_events (conversation_id, seq, kind, payload)
VALUES ($1, $2, 'blockDelta', jsonb_build_object('blockId', $1::uuid, 'content', $3::text))`
	notifyBaselineSQL = `SELECT pg_notify('` + baselineChannel + `', $1::uuid::text || ':' || $2::bigint::text)`
)

const (
	// deleteConversationsSQL removes the bench's conversations (and, by
	// cascade, everything in them) from a database it did not create.
	deleteConversationsSQL = `DELETE FROM convo.conversations WHERE owner_id = $1`
	// deleteConversationsByIDSQL removes the peer measurement's
	// conversations, which belong to cmd/api's single user.
	deleteConversationsByIDSQL = `DELETE FROM convo.conversations WHERE id = ANY($1)`
	// notifySettingSQL reads the session's convo.notify_events, which a new
	// session takes from the database (convo.set_event_notify).
	notifySettingSQL = `SELECT coalesce(current_setting('convo.notify_events', true), '')`
	// settingsSQL reads what decides the cost of a commit.
	settingsSQL = `SELECT current_setting('server_version'), current_setting('fsync'),
       current_setting('synchronous_commit'), current_setting('wal_level')`
)

func createBaseline(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, createBaselineSQL); err != nil {
		return fmt.Errorf("create the baseline table: %w", err)
	}
	return nil
}

func dropBaseline(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, dropBaselineSQL); err != nil {
		return fmt.Errorf("drop the baseline table: %w", err)
	}
	return nil
}

// insertBaseline commits one event row, and its notification when notify
// is set, in one transaction sent in one round trip (as append_block is
// one round trip).
func insertBaseline(ctx context.Context, conn *pgxpool.Conn, id uuid.UUID, seq int, text string, notify bool) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(insertBaselineSQL, id, seq, text)
	if notify {
		b.Queue(notifyBaselineSQL, id, seq)
	}
	b.Queue("COMMIT")
	return conn.SendBatch(ctx, b).Close()
}

// notifySetting reads whether a new session of the database notifies.
func notifySetting(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var v string
	if err := pool.QueryRow(ctx, notifySettingSQL).Scan(&v); err != nil {
		return false, fmt.Errorf("read convo.notify_events: %w", err)
	}
	return v != "off", nil
}
