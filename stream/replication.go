package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file holds the replication protocol's commands, which sqlc cannot
// express: the one place convo speaks them.

// The publications LogicalFeed streams (db/schema/00004_logical_feed.sql).
const (
	// PublicationEvents publishes every inserted row of convo.events.
	PublicationEvents = "convo_events"
	// PublicationDeletions publishes deleted rows (their id) of
	// convo.conversations.
	PublicationDeletions = "convo_deletions"
)

// connectReplication opens a logical replication connection (a walsender
// bound to the configured database). Timestamps are sent as text, so the
// session's DateStyle and TimeZone are pinned to what the decoder parses.
func connectReplication(ctx context.Context, cfg *pgx.ConnConfig) (*pgconn.PgConn, error) {
	c := cfg.Config.Copy()
	if c.RuntimeParams == nil {
		c.RuntimeParams = make(map[string]string)
	}
	c.RuntimeParams["replication"] = "database"
	c.RuntimeParams["DateStyle"] = "ISO"
	c.RuntimeParams["TimeZone"] = "UTC"
	if c.RuntimeParams["application_name"] == "" {
		c.RuntimeParams["application_name"] = "convo-logical-feed"
	}
	conn, err := pgconn.ConnectConfig(ctx, c)
	if err != nil {
		return nil, explainConnectError(err, c.User)
	}
	return conn, nil
}

// explainConnectError says what to change when the server refuses a
// replication connection for a reason an operator must fix.
func explainConnectError(err error, user string) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch {
	case pgErr.Code == "42501": // insufficient_privilege
		return fmt.Errorf("the logical feed needs a role with the REPLICATION attribute "+
			"(ALTER ROLE %s REPLICATION) or a superuser: %w", pgx.Identifier{user}.Sanitize(), err)
	case strings.Contains(pgErr.Message, "max_wal_senders"):
		return fmt.Errorf("the logical feed needs wal_level = logical and max_wal_senders > 0 on the server "+
			"(set them in postgresql.conf and restart PostgreSQL): %w", err)
	}
	return err
}

// checkServer reports what would keep logical replication from working on
// conn's server and database: wal_level, and the publications.
func checkServer(ctx context.Context, conn *pgconn.PgConn) error {
	sys, err := pglogrepl.IdentifySystem(ctx, conn)
	if err != nil {
		return fmt.Errorf("identify system: %w", err)
	}
	if sys.DBName == "" {
		return errors.New("the replication connection is not bound to a database")
	}
	level, err := singleValue(ctx, conn, "SHOW wal_level")
	if err != nil {
		return fmt.Errorf("show wal_level: %w", err)
	}
	if level != "logical" {
		return fmt.Errorf("logical replication needs wal_level = logical, but the server has wal_level = %s: "+
			"set wal_level = logical (in postgresql.conf, or ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL", level)
	}
	// A walsender bound to a database answers plain SQL too (simple
	// protocol only, so not through sqlc).
	n, err := singleValue(ctx, conn, fmt.Sprintf("SELECT count(*) FROM pg_catalog.pg_publication WHERE pubname IN ('%s', '%s')",
		PublicationEvents, PublicationDeletions))
	if err != nil {
		return fmt.Errorf("look up publications: %w", err)
	}
	if n != "2" {
		return fmt.Errorf("database %s lacks the publications %s and %s: migrate it (the server does at start)",
			sys.DBName, PublicationEvents, PublicationDeletions)
	}
	return nil
}

func singleValue(ctx context.Context, conn *pgconn.PgConn, sql string) (string, error) {
	results, err := conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		return "", err
	}
	if len(results) != 1 || len(results[0].Rows) != 1 || len(results[0].Rows[0]) != 1 {
		return "", fmt.Errorf("%s: want one value", sql)
	}
	return string(results[0].Rows[0][0]), nil
}

// newSlotName returns a slot name unique to this process and connection:
// convo_<pid>_<random>. Slot names are cluster-wide.
func newSlotName() string {
	b := make([]byte, 6)
	rand.Read(b)
	return fmt.Sprintf("convo_%d_%s", os.Getpid(), hex.EncodeToString(b))
}

// createTemporarySlot creates a pgoutput slot that the server drops when
// this connection ends (however it ends), and returns the LSN from which it
// streams every transaction that commits.
func createTemporarySlot(ctx context.Context, conn *pgconn.PgConn, slot string) (pglogrepl.LSN, error) {
	res, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{
		Temporary: true, SnapshotAction: "NOEXPORT_SNAPSHOT", Mode: pglogrepl.LogicalReplication,
	})
	if err != nil {
		return 0, fmt.Errorf("create replication slot %s: %w", slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return 0, fmt.Errorf("replication slot %s: consistent point: %w", slot, err)
	}
	return lsn, nil
}

// startStreaming starts streaming the publications' changes from slot,
// after lsn, with pgoutput's protocol version 1 (whole transactions, sent at
// commit).
func startStreaming(ctx context.Context, conn *pgconn.PgConn, slot string, lsn pglogrepl.LSN) error {
	err := pglogrepl.StartReplication(ctx, conn, slot, lsn, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{
			"proto_version '1'",
			fmt.Sprintf("publication_names '%s,%s'", PublicationEvents, PublicationDeletions),
		},
	})
	if err != nil {
		return fmt.Errorf("start replication from slot %s: %w", slot, err)
	}
	return nil
}

// confirm tells the server that everything before lsn is processed, so the
// slot may release the WAL before it; replyRequested asks for a keepalive
// back at once (to notice a dead connection).
func confirm(ctx context.Context, conn *pgconn.PgConn, lsn pglogrepl.LSN, replyRequested bool) error {
	err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: lsn, ClientTime: time.Now(), ReplyRequested: replyRequested,
	})
	if err != nil {
		return fmt.Errorf("confirm LSN %s: %w", lsn, err)
	}
	return nil
}
