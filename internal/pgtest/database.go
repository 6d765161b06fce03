package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/db"
)

// createTemplate creates and migrates the template database of this test
// binary, then closes it to connections: CREATE DATABASE ... TEMPLATE
// fails while anyone is connected to the template, so nobody may be.
func (s *testServer) createTemplate(ctx context.Context) error {
	name := "convo_tpl_" + randomSuffix()
	if err := s.exec(ctx, "CREATE DATABASE "+ident(name)); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	s.template = name
	dsn, err := withDatabase(s.adminDSN, name)
	if err != nil {
		return err
	}
	// db.Migrate closes its connections before returning; the server may
	// take a moment to notice, which CREATE DATABASE waits out.
	if err := db.Migrate(ctx, dsn); err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	if err := s.exec(ctx, "ALTER DATABASE "+ident(name)+" WITH ALLOW_CONNECTIONS false IS_TEMPLATE true"); err != nil {
		return fmt.Errorf("seal template %s: %w", name, err)
	}
	return s.chooseCloneStrategy(ctx)
}

// chooseCloneStrategy picks how createDatabase copies the template. From
// PostgreSQL 15 on, CREATE DATABASE writes every page of the template to
// the WAL by default (STRATEGY WAL_LOG), some 10 MB per test database;
// STRATEGY FILE_COPY copies the files and takes a checkpoint instead,
// which costs little on a server with fsync off (the tests' private
// clusters) and measured half the time there, one clone at a time or
// four at once. With fsync on (a container, a server named by its URL,
// perhaps shared) a checkpoint per test is dearer than the WAL: the
// default stays. A server before 15 has no STRATEGY and copies files.
func (s *testServer) chooseCloneStrategy(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.adminDSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version int
	var fsync string
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int, current_setting('fsync')").Scan(&version, &fsync); err != nil {
		return fmt.Errorf("read the server's version and fsync: %w", err)
	}
	if version >= 150000 && fsync == "off" {
		s.cloneStrategy = " STRATEGY FILE_COPY"
	}
	return nil
}

// createDatabase clones the template into a new database and returns its
// name and a connection string for it.
func (s *testServer) createDatabase(ctx context.Context) (name, dsn string, err error) {
	name = "t_" + randomSuffix()
	err = s.exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(s.template)+s.cloneStrategy)
	// A retry after a lost answer may find its own earlier success; the
	// random name cannot belong to anyone else.
	if err != nil && sqlState(err) != "42P04" { // duplicate_database
		return "", "", fmt.Errorf("create database from template %s: %w", s.template, err)
	}
	dsn, err = withDatabase(s.adminDSN, name)
	if err != nil {
		return "", "", err
	}
	return name, dsn, nil
}

// dropDatabase drops database name, disconnecting whoever is still
// connected. A missing database is not an error.
func (s *testServer) dropDatabase(ctx context.Context, name string) error {
	if name == s.template {
		// A template cannot be dropped; this one refuses connections,
		// which DROP DATABASE does not mind.
		err := s.exec(ctx, "ALTER DATABASE "+ident(name)+" IS_TEMPLATE false")
		if err != nil && sqlState(err) != "3D000" { // invalid_catalog_name
			return fmt.Errorf("drop database %s: %w", name, err)
		}
	}
	if err := s.exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// ping checks the server accepts our connections.
func (s *testServer) ping(ctx context.Context) error {
	if _, err := pgx.ParseConfig(s.adminDSN); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, s.adminDSN)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// exec runs one statement on a fresh connection to the maintenance
// database, retrying while the failure is likely to pass: the template
// still has a session that is going away, the server is restarting (a test
// may be simulating an outage), or the connection broke. A fresh
// connection per statement keeps no session that a restart could break or
// that could sit on a database being cloned or dropped.
func (s *testServer) exec(ctx context.Context, sql string) error {
	wait := 20 * time.Millisecond
	for {
		err := s.execOnce(ctx, sql)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up retrying: %w)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

func (s *testServer) execOnce(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.adminDSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// transient reports whether an error of exec may go away on its own.
func transient(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return true // no answer from the server: connection refused or broken
	}
	switch pgErr.Code {
	case "55006", // object_in_use: someone is connected to the source database
		"57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return true
	}
	return strings.HasPrefix(pgErr.Code, "08") // connection_exception
}

func sqlState(err error) string {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgErr.Code
	}
	return ""
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// randomSuffix makes database names unique across test binaries sharing a
// server: 64 random bits in lowercase hex, which needs no quoting.
func randomSuffix() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// withDatabase returns dsn, a URL or a keyword/value connection string,
// pointed at database name instead.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse connection URL: %w", err)
		}
		u.Path, u.RawPath = "/"+name, ""
		return u.String(), nil
	}
	// In keyword/value strings the last occurrence of a keyword wins.
	return dsn + " dbname=" + name, nil
}
