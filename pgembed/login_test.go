//go:build unix

package pgembed

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestLogin: Login makes a role that logs in over TCP with the password
// it keeps in the data directory (mode 0600), the same at every call; a
// password a person wrote in the file, quotes, backslash and SQL included,
// is the role's password as written, and runs no SQL of its own.
func TestLogin(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dataDir := filepath.Join(testDir(t), "data")
	c := startCluster(t, Options{DataDir: dataDir, Fast: true})
	admin := connect(t, c.DSN("postgres"))
	for _, stmt := range []string{"CREATE ROLE readers NOLOGIN", "CREATE ROLE canary NOLOGIN"} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	login := func() string {
		t.Helper()
		dsn, err := c.Login(ctx, "postgres", "worker_login", "worker-password", "readers")
		if err != nil {
			t.Fatalf("Login: %v", err)
		}
		conn := connect(t, dsn)
		if user := queryString(t, conn, "SELECT current_user"); user != "worker_login" {
			t.Errorf("connected as %q, want worker_login", user)
		}
		if member := queryString(t, conn, "SELECT pg_has_role('readers', 'MEMBER')::text"); member != "true" {
			t.Errorf("worker_login is not a member of readers")
		}
		return dsn
	}

	first := login()
	path := filepath.Join(dataDir, "worker-password")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("password file: %v, mode %v; want 0600", err, fi)
	}
	generated, _ := readSecret(path)
	if again := login(); again != first || generated == "" {
		t.Errorf("the second Login gave %q, the first %q (password %q)", again, first, generated)
	}

	// A password a person wrote: formatted by the server, it is the
	// role's password as written, and none of it runs as SQL.
	written := `it's a "pass" \ word'; DROP ROLE canary; --`
	if err := os.WriteFile(path, []byte(written+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	login()
	cfg, err := pgx.ParseConfig(c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = "worker_login", written
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("logging in with the written password: %v", err)
	}
	conn.Close(ctx)
	if n := queryString(t, admin, "SELECT count(*)::text FROM pg_roles WHERE rolname = 'canary'"); n != "1" {
		t.Errorf("the written password ran SQL: role canary is gone")
	}
}
