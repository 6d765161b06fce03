//go:build unix

package pgembed

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The tests below run this test binary again as a helper process, selected
// by these variables, to observe what happens when a program using pgembed
// dies, and to run pgembed as a user other than root.
const (
	helperEnv  = "PGEMBED_TEST_HELPER"
	dataDirEnv = "PGEMBED_TEST_DATADIR"
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "orphan":
		helperOrphan()
	case "notroot":
		helperNotRoot()
	}
	os.Exit(2)
}

// helperOrphan starts a durable cluster, reports its PID and then waits to
// be killed without ever calling Stop.
func helperOrphan() {
	c, err := Start(context.Background(), Options{DataDir: os.Getenv(dataDirEnv), Logger: quiet})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("PID", c.pid())
	time.Sleep(time.Hour)
}

// helperNotRoot starts a cluster as whoever runs it, queries it, stops it
// and says OK.
func helperNotRoot() {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	c, err := Start(ctx, Options{DataDir: os.Getenv(dataDirEnv), Fast: true, Logger: quiet})
	if err != nil {
		fail(err)
	}
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		fail(err)
	}
	var one int
	err = conn.QueryRow(ctx, "SELECT 1").Scan(&one)
	conn.Close(ctx)
	if err != nil {
		fail(err)
	}
	if err := c.Stop(ctx); err != nil {
		fail(err)
	}
	fmt.Println("OK uid", os.Geteuid())
	os.Exit(0)
}

// helper runs this test binary as the helper named mode.
func helper(t *testing.T, mode, exe, dataDir string) *exec.Cmd {
	t.Helper()
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, dataDirEnv+"="+dataDir)
	cmd.Stderr = os.Stderr
	return cmd
}

func TestPostgresDiesWithItsParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal that stops an orphaned postgres exists only on Linux")
	}
	t.Parallel()
	dataDir := filepath.Join(testDir(t), "data")
	cmd := helper(t, "orphan", "", dataDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
		io.Copy(io.Discard, out)
	}()
	var pid int
	select {
	case l := <-line:
		if _, err := fmt.Sscanf(l, "PID %d", &pid); err != nil {
			t.Fatalf("helper said %q", l)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("helper did not start postgres within 60s")
	}
	if processGone(pid) {
		t.Fatalf("postmaster %d is not running", pid)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitGone(t, pid)

	// The orphan shut down cleanly enough for the data directory to be
	// used again.
	c := startCluster(t, Options{DataDir: dataDir, Fast: true})
	conn := connect(t, c.DSN("postgres"))
	if got := queryString(t, conn, "SELECT 'up'"); got != "up" {
		t.Fatalf("got %q", got)
	}
}

func TestStartAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: every other test already runs postgres as the current user")
	}
	t.Parallel()
	as, err := serverUser()
	if err != nil {
		t.Fatal(err)
	}
	// Run a copy of this test binary as the postgres user, in a directory
	// that user owns: pgembed then takes its not-root path.
	home := filepath.Join(testDir(t), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := as.chown(home); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(filepath.Dir(home), "pgembed.test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}

	cmd := helper(t, "notroot", exe, filepath.Join(home, "data"))
	cmd.Dir = home
	cmd.Env = append(cmd.Env, "HOME="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(as.uid), Gid: uint32(as.gid)}}
	out, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(out), "OK uid") {
		t.Fatalf("helper as %s: %v\n%s", as.name, err, out)
	}
	if want := fmt.Sprintf("OK uid %d", as.uid); strings.TrimSpace(string(out)) != want {
		t.Errorf("helper said %q, want %q", out, want)
	}
}
