//go:build unix

package pgembed

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPassword checks that TCP connections need the superuser's password,
// that it is kept in the data directory readable by its owner only and
// survives a restart, and that a data directory made before passwords
// (trusting every TCP connection) is given one at its next start.
func TestPassword(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dataDir := filepath.Join(testDir(t), "data")
	c := startCluster(t, Options{DataDir: dataDir, Fast: true})
	pwFile := filepath.Join(dataDir, PasswordFileName)
	fi, err := os.Stat(pwFile)
	if err != nil {
		t.Fatalf("no password file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("password file mode %v, want 0600", fi.Mode().Perm())
	}
	pw, _ := readSecret(pwFile)
	if len(pw) < 24 || !strings.Contains(c.DSN("postgres"), ":"+pw+"@") {
		t.Fatalf("password %q, DSN %q: the DSN must carry it", pw, c.DSN("postgres"))
	}
	refused := func(what string) {
		t.Helper()
		for _, dsn := range []string{dsn(c.Port(), "postgres", ""), dsn(c.Port(), "postgres", "wrong")} {
			conn, err := pgx.Connect(ctx, dsn)
			if err == nil {
				conn.Close(ctx)
				t.Fatalf("%s: a TCP connection without the password was accepted", what)
			}
			if !strings.Contains(err.Error(), "password authentication failed") {
				t.Errorf("%s: err = %v, want a password authentication failure", what, err)
			}
		}
		connect(t, c.DSN("postgres")).Close(ctx)
	}
	refused("fresh")

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	c = startCluster(t, Options{DataDir: dataDir, Fast: true})
	if again, _ := readSecret(pwFile); again != pw || c.password != pw {
		t.Fatalf("password changed across a restart")
	}
	refused("restarted")

	// A directory from before: trust over TCP, no password file.
	conn := connect(t, c.DSN("postgres"))
	if _, err := conn.Exec(ctx, "ALTER ROLE postgres PASSWORD NULL"); err != nil {
		t.Fatal(err)
	}
	hba := strings.ReplaceAll(hbaConf, "scram-sha-256", "trust")
	if err := os.WriteFile(filepath.Join(dataDir, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	if err := os.Remove(pwFile); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	c = startCluster(t, Options{DataDir: dataDir, Fast: true})
	newPW, _ := readSecret(pwFile)
	if newPW == "" || newPW == pw {
		t.Fatalf("an old data directory got password %q", newPW)
	}
	refused("protected at start")
}
