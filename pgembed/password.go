package pgembed

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// PasswordFileName is the file in the data directory that holds the
// password of the superuser postgres (mode 0600). TCP connections need it
// (scram-sha-256); the Unix socket, in a directory only the server user
// can enter, stays trusted for local tools run as that user.
const PasswordFileName = "convo-password"

// hbaConf is the pg_hba.conf of a cluster: the socket trusted, TCP (and
// replication over TCP) with the password.
const hbaConf = `# Written by pgembed. TCP needs the superuser's password (scram-sha-256),
# which is in ` + PasswordFileName + `; the Unix socket is trusted.
local   all             all                                     trust
local   replication     all                                     trust
host    all             all             127.0.0.1/32            scram-sha-256
host    all             all             ::1/128                 scram-sha-256
host    replication     all             127.0.0.1/32            scram-sha-256
host    replication     all             ::1/128                 scram-sha-256
`

// newPassword returns a random password of URL-safe characters.
func newPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate a password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// readSecret returns the password kept in the file path, without the
// white space around it, or "" when there is none. A person may have
// written it: it is passed to SQL only through setPassword.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the password in %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// writeSecret keeps password in the file path, readable by its owner (the
// server user) only.
func (c *Cluster) writeSecret(path, password string) error {
	if err := os.WriteFile(path, []byte(password+"\n"), 0o600); err != nil {
		return fmt.Errorf("keep the password in %s: %w", path, err)
	}
	return c.as.chown(path)
}

// setPassword runs stmt, a CREATE ROLE or ALTER ROLE whose role name is
// %I and password %L, with role and password formatted into it by the
// server (format), so that no character of either, whatever a person
// wrote in a password file, can end its identifier or literal.
func setPassword(ctx context.Context, conn *pgx.Conn, stmt, role, password string) error {
	var sql string
	if err := conn.QueryRow(ctx, "SELECT format($1::text, $2::text, $3::text)", stmt, role, password).Scan(&sql); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, sql)
	return err
}

// pwfile writes password to a temporary file the server user can read,
// for initdb --pwfile; the returned function removes it.
func (c *Cluster) pwfile(password string) (string, func(), error) {
	f, err := os.CreateTemp("", "pgembed-pw-*")
	if err != nil {
		return "", nil, fmt.Errorf("password file: %w", err)
	}
	remove := func() { os.Remove(f.Name()) }
	if _, err := f.WriteString(password + "\n"); err != nil {
		f.Close()
		remove()
		return "", nil, fmt.Errorf("password file: %w", err)
	}
	f.Close()
	if err := c.as.chown(f.Name()); err != nil {
		remove()
		return "", nil, err
	}
	return f.Name(), remove, nil
}

// protect gives a data directory made before pgembed used passwords one:
// it sets the superuser's password over the connection its old, trusting
// pg_hba.conf still accepts, switches TCP to scram-sha-256 and reloads.
func (c *Cluster) protect(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("set the postgres password: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := setPassword(ctx, conn, "ALTER ROLE %I PASSWORD %L", "postgres", c.password); err != nil {
		return fmt.Errorf("set the postgres password: %w", err)
	}
	hba := filepath.Join(c.dataDir, "pg_hba.conf")
	if err := os.WriteFile(hba, []byte(hbaConf), 0o600); err != nil {
		return fmt.Errorf("require the password in pg_hba.conf: %w", err)
	}
	if err := c.as.chown(hba); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("reload pg_hba.conf: %w", err)
	}
	if err := c.writeSecret(filepath.Join(c.dataDir, PasswordFileName), c.password); err != nil {
		return err
	}
	c.logger.Info("postgres now requires a password over TCP", "password_file", filepath.Join(c.dataDir, PasswordFileName))
	return nil
}
