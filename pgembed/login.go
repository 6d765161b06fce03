package pgembed

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Login makes role a role that logs in over TCP with a password, a member
// of each of inRoles (which must exist), and returns the connection string
// of database as role. The password is generated the first time and kept
// in the data directory in file (mode 0600, as PasswordFileName), and set
// again at every call, so that the file and the role always agree (a
// deleted file gets a new password); a password a person wrote in file is
// used as written, whatever its characters (the server quotes it). It is
// how the embedded default gives workers a login that is not the
// superuser's.
func (c *Cluster) Login(ctx context.Context, database, role, file string, inRoles ...string) (string, error) {
	path := filepath.Join(c.dataDir, file)
	password, err := readSecret(path)
	if err != nil {
		return "", err
	}
	if password == "" {
		if password, err = newPassword(); err != nil {
			return "", err
		}
		if err := c.writeSecret(path, password); err != nil {
			return "", err
		}
	}
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("login %s: %w", role, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	name := pgx.Identifier{role}.Sanitize()
	err = setPassword(ctx, conn, "CREATE ROLE %I LOGIN PASSWORD %L", role, password)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "42710" { // duplicate_object
		err = setPassword(ctx, conn, "ALTER ROLE %I LOGIN PASSWORD %L", role, password)
	}
	if err != nil {
		return "", fmt.Errorf("login %s: %w", role, err)
	}
	for _, group := range inRoles {
		if _, err := conn.Exec(ctx, "GRANT "+pgx.Identifier{group}.Sanitize()+" TO "+name); err != nil {
			return "", fmt.Errorf("login %s: %w", role, err)
		}
	}
	u, err := url.Parse(c.DSN(database))
	if err != nil {
		return "", err
	}
	u.User = url.UserPassword(role, password)
	return u.String(), nil
}
