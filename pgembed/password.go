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

// readPassword returns the password kept in dir, or "" when there is none.
func readPassword(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, PasswordFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the postgres password: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// writePassword keeps password in dir, readable by its owner only.
func (c *Cluster) writePassword(dir, password string) error {
	path := filepath.Join(dir, PasswordFileName)
	if err := os.WriteFile(path, []byte(password+"\n"), 0o600); err != nil {
		return fmt.Errorf("keep the postgres password: %w", err)
	}
	return c.as.chown(path)
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
	// The password is URL-safe base64: no quote can end the literal.
	if _, err := conn.Exec(ctx, "ALTER ROLE postgres PASSWORD '"+c.password+"'"); err != nil {
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
	if err := c.writePassword(c.dataDir, c.password); err != nil {
		return err
	}
	c.logger.Info("postgres now requires a password over TCP", "password_file", filepath.Join(c.dataDir, PasswordFileName))
	return nil
}
