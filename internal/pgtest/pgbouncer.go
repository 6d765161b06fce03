//go:build unix

package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvPgBouncer names the environment variable that points PgBouncer at a
// pgbouncer binary other than the one on PATH or Debian's.
const EnvPgBouncer = "CONVO_TEST_PGBOUNCER"

// PgBouncerPoolSize is how many server connections the PgBouncer of
// PgBouncer opens per database: few, so that the transactions of a
// test's many client connections share them, as in production, and a
// statement that leans on a session (a named prepared statement, a
// session setting, LISTEN) meets a server connection it did not set up.
const PgBouncerPoolSize = 3

// PgBouncer starts a PgBouncer (1.18 or later: Debian's, apt-get install
// pgbouncer) in transaction mode, on a free local port, in front of the
// database of each of dsns, and returns the URL of each through it, in
// the same order: the same login and database, by way of the pooler. It
// runs until the test ends.
//
// The test fails, saying how to install it, when no pgbouncer binary is
// found (EnvPgBouncer, PATH, /usr/sbin/pgbouncer): it is never skipped.
func PgBouncer(t testing.TB, dsns ...string) []string {
	t.Helper()
	bin, err := pgbouncerBinary()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	dir, err := os.MkdirTemp(tempDirBases()[0], "convo-pgbouncer-*")
	if err != nil {
		t.Fatalf("pgtest: pgbouncer directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// PgBouncer refuses to run as root: as root, it runs as postgres (as
	// the private cluster does), which must read its directory.
	as, err := pgbouncerUser()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("pgtest: a port for pgbouncer: %v", err)
	}
	var dbs strings.Builder
	pooled := make([]string, len(dsns))
	for i, dsn := range dsns {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatalf("pgtest: pgbouncer: database url %d: %v", i, err)
		}
		alias := "db" + strconv.Itoa(i)
		// auth_type = any: the client's login is not checked, the
		// server's is the one given here.
		fmt.Fprintf(&dbs, "%s = host=%s port=%d dbname=%s user=%s password=%s\n", alias, cfg.Host, cfg.Port,
			iniValue(cfg.Database), iniValue(cfg.User), iniValue(cfg.Password))
		u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Path: "/" + alias, RawQuery: "sslmode=disable"}
		pooled[i] = u.String()
	}
	ini := filepath.Join(dir, "pgbouncer.ini")
	logFile := filepath.Join(dir, "pgbouncer.log")
	text := fmt.Sprintf(`[databases]
%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = %d
max_client_conn = 500
logfile = %s
server_login_retry = 1
`, dbs.String(), port, PgBouncerPoolSize, logFile)
	if err := os.WriteFile(ini, []byte(text), 0o644); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	// The log is written by pgbouncer's user.
	if f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		f.Close()
		if as != nil {
			os.Chown(logFile, int(as.Uid), int(as.Gid)) //nolint:errcheck // pgbouncer says so if it cannot write
		}
	}
	cmd := exec.Command(bin, ini)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: as}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("pgtest: start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT) //nolint:errcheck // it may have exited
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill() //nolint:errcheck // as above
			<-exited
		}
		if t.Failed() {
			if b, err := os.ReadFile(logFile); err == nil {
				t.Logf("pgbouncer's log:\n%s", b)
			}
		}
	})
	// Ready once a query goes through it.
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logFile)
			t.Fatalf("pgtest: pgbouncer exited (%v): %s\n%s", err, out.String(), b)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, pooled[0])
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return pooled
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logFile)
			t.Fatalf("pgtest: pgbouncer on port %d does not answer: %v\n%s", port, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pgbouncerBinary finds pgbouncer, or says how to install it.
func pgbouncerBinary() (string, error) {
	if p := os.Getenv(EnvPgBouncer); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	const debian = "/usr/sbin/pgbouncer"
	if _, err := os.Stat(debian); err == nil {
		return debian, nil
	}
	return "", errors.New("this test runs convo through PgBouncer, and there is no pgbouncer binary on PATH nor at " + debian +
		": install it (apt-get install pgbouncer; scripts/test.sh does as root) or point " + EnvPgBouncer + " at one")
}

// pgbouncerUser is who runs pgbouncer: nil (the current user) unless root,
// which pgbouncer refuses to run as; then the postgres user.
func pgbouncerUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgbouncer refuses to run as root and there is no postgres user to run it as: %w", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// freePort returns a local TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// iniValue quotes v for a connection string of pgbouncer.ini's databases.
func iniValue(v string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), "'", `\'`) + "'"
}
