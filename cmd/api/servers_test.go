package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testbin"
	"github.com/convo-dev/convo/pgembed"
)

// The feeds a deployment can choose, by subtest name.
var feedNames = map[string]string{"Notify": feedNotify, "Logical": feedLogical}

// TestTwoServers runs two servers on one database, as a deployment behind
// a load balancer does, each with its own feed: a reply written through the
// SQL API reaches subscribers on both, identically, with either feed.
func TestTwoServers(t *testing.T) {
	t.Parallel()
	for name, feed := range feedNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"DATABASE_URL": pgtest.DSN(t), "CONVO_FEED": feed, "CONVO_WORKERS": "0"}
			a, b := startMain(t, env), startMain(t, env)
			checkServersAgree(t, env["DATABASE_URL"], a.URL(), b.URL())
		})
	}
}

// TestTwoServersAsProcesses is TestTwoServers with two real server
// processes, built from cmd/api as deployed (with the race detector when
// the tests have it: testbin.Build).
func TestTwoServersAsProcesses(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t, apiPkg)
	for name, feed := range feedNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.DSN(t)
			a := startProcess(t, bin, "DATABASE_URL="+dsn, "CONVO_FEED="+feed, "CONVO_WORKERS=0")
			b := startProcess(t, bin, "DATABASE_URL="+dsn, "CONVO_FEED="+feed, "CONVO_WORKERS=0")
			checkServersAgree(t, dsn, a.url, b.url)
			a.stop(t)
			b.stop(t)
		})
	}
}

// TestFeedSetting checks how CONVO_FEED and --feed are read.
func TestFeedSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env, flag, want, err string
	}{
		{want: feedNotify},
		{env: "logical", want: feedLogical},
		{env: "logical", flag: "notify", want: feedNotify},
		{env: "kafka", err: `CONVO_FEED (--feed) is "kafka": want "notify"`},
		{flag: "Logical", err: `is "Logical"`},
	} {
		m := NewMain()
		var args []string
		if tc.flag != "" {
			args = []string{"--feed", tc.flag}
		}
		err := m.ParseFlags(args, func(k string) string {
			if k == "CONVO_FEED" {
				return tc.env
			}
			return ""
		})
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("env %q, flag %q: error %v, want one saying %s", tc.env, tc.flag, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("env %q, flag %q: %v", tc.env, tc.flag, err)
		case tc.err == "" && m.Config.Feed != tc.want:
			t.Errorf("env %q, flag %q: feed %q, want %q", tc.env, tc.flag, m.Config.Feed, tc.want)
		}
	}
}

// TestLogicalFeedNeedsWALLevel checks that a server asked for the logical
// feed on a PostgreSQL without wal_level=logical fails at start, saying
// what to set, and that the database's events still notify.
func TestLogicalFeedNeedsWALLevel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := startPlainCluster(t)
	m := NewMain()
	m.Stdout = io.Discard
	env := map[string]string{"DATABASE_URL": cluster, "CONVO_FEED": "logical", "CONVO_HTTP_ADDR": "127.0.0.1:0",
		"CONVO_LOG_LEVEL": "error", "CONVO_WORKERS": "0"}
	if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	err := m.Run(ctx)
	m.Close()
	if err == nil || !strings.Contains(err.Error(), "wal_level = logical") || !strings.Contains(err.Error(), "CONVO_FEED=logical") {
		t.Fatalf("Run = %v; want an error saying to set wal_level = logical", err)
	}
	t.Log(err)
	conn, err := pgx.Connect(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var notify string
	if err := conn.QueryRow(ctx, `SELECT coalesce(current_setting('convo.notify_events', true), '')`).Scan(&notify); err != nil {
		t.Fatal(err)
	}
	if notify == "off" {
		t.Error("the failed start turned the NOTIFY of events off")
	}
}

// startPlainCluster starts a private PostgreSQL with the default
// wal_level (replica) and returns a connection string to a database on it.
func startPlainCluster(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	cluster, err := pgembed.Start(ctx, pgembed.Options{
		DataDir: filepath.Join(tempDirFor(t, "postgres"), "pgdata"), Fast: true,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Stop(context.Background()) }) //nolint:errcheck
	if err := cluster.CreateDatabase(ctx, "convo"); err != nil {
		t.Fatal(err)
	}
	return cluster.DSN("convo")
}

// checkServersAgree subscribes twice on every server, writes a reply
// through the SQL worker API, and checks that every stream received the
// same messages, holding the reply's text.
func checkServersAgree(t *testing.T, dsn string, urls ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sent, err := convov1connect.NewConversationServiceClient(http.DefaultClient, urls[0]).
		SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "hello, servers"}))
	if err != nil {
		t.Fatal(err)
	}

	type received struct {
		msgs []*convov1.StreamConversationResponse
		err  error
	}
	var streams []chan received
	for _, url := range urls {
		for range 2 {
			client := convov1connect.NewConversationServiceClient(http.DefaultClient, url)
			stream, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: sent.Msg.ConversationId}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { stream.Close() })
			// Subscribed once the snapshot is here: the reply comes after.
			if !stream.Receive() {
				t.Fatalf("%s: no snapshot: %v", url, stream.Err())
			}
			done := make(chan received, 1)
			go func() {
				r := received{msgs: []*convov1.StreamConversationResponse{stream.Msg()}}
				for stream.Receive() {
					r.msgs = append(r.msgs, stream.Msg())
					if stream.Msg().GetEvent().GetPromptCompleted() != nil {
						done <- r
						return
					}
				}
				r.err = stream.Err()
				done <- r
			}()
			streams = append(streams, done)
		}
	}

	text := writeReplySQL(t, ctx, dsn, sent.Msg.PromptId)

	var first []*convov1.StreamConversationResponse
	for i, done := range streams {
		var r received
		select {
		case r = <-done:
		case <-ctx.Done():
			t.Fatalf("stream %d (server %s): no promptCompleted", i, urls[i/2])
		}
		if r.err != nil {
			t.Fatalf("stream %d (server %s) ended after %d messages: %v", i, urls[i/2], len(r.msgs), r.err)
		}
		var got strings.Builder
		for _, m := range r.msgs {
			got.WriteString(m.GetEvent().GetBlockDelta().GetContent())
		}
		if got.String() != text {
			t.Errorf("stream %d (server %s) streamed %q, want %q", i, urls[i/2], got.String(), text)
		}
		if i == 0 {
			first = r.msgs
			continue
		}
		if len(r.msgs) != len(first) {
			t.Errorf("stream %d (server %s): %d messages, stream 0 had %d", i, urls[i/2], len(r.msgs), len(first))
			continue
		}
		for j := range r.msgs {
			if !proto.Equal(r.msgs[j], first[j]) {
				t.Errorf("stream %d (server %s), message %d:\n%v\nstream 0 had\n%v", i, urls[i/2], j, r.msgs[j], first[j])
				break
			}
		}
	}
}

// writeReplySQL plays a worker in any language: it writes a reply to
// prompt through the SQL worker API and returns its text.
func writeReplySQL(t *testing.T, ctx context.Context, dsn, prompt string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`SELECT convo.start_prompt($1::uuid)`, prompt)
	var block string
	if err := conn.QueryRow(ctx, `SELECT convo.start_block($1::uuid, 'text')::text`, prompt).Scan(&block); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for i := range 50 {
		delta := fmt.Sprintf("token%d ", i)
		exec(`SELECT convo.append_block($1::uuid, $2::text)`, block, delta)
		text.WriteString(delta)
	}
	exec(`SELECT convo.end_block($1::uuid)`, block)
	exec(`SELECT convo.complete_prompt($1::uuid)`, prompt)
	return text.String()
}

// serverProcess is a server running as its own process.
type serverProcess struct {
	cmd *exec.Cmd
	url string
	// logs is what it wrote to stderr so far; stderrDone closes once it
	// closed stderr (it exited), so logs is complete.
	logs       *syncBuffer
	stderrDone chan struct{}
}

// startProcess runs the server binary with env (besides the test's) and
// waits until it serves.
func startProcess(t *testing.T, bin string, env ...string) *serverProcess {
	t.Helper()
	cmd := exec.Command(bin, "--http-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck
	p := &serverProcess{cmd: cmd, logs: &syncBuffer{}, stderrDone: make(chan struct{})}
	urlRE := regexp.MustCompile(`msg="convo is serving" url="?([^"\s]+)`)
	scanner := bufio.NewScanner(stderr)
	deadline := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() }) //nolint:errcheck
	for p.url == "" && scanner.Scan() {
		fmt.Fprintln(p.logs, scanner.Text())
		if m := urlRE.FindStringSubmatch(scanner.Text()); m != nil {
			p.url = m[1]
		}
	}
	deadline.Stop()
	go func() {
		defer close(p.stderrDone)
		for scanner.Scan() {
			fmt.Fprintln(p.logs, scanner.Text())
		}
	}()
	if p.url == "" {
		t.Fatalf("server did not start:\n%s", p.logs)
	}
	return p
}

// stop sends SIGTERM and expects a clean exit.
func (p *serverProcess) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("server exited with %v after SIGTERM; logs:\n%s", err, p.logs)
	}
}

// TestMigrateFlag migrates an empty database with --migrate, as a deploy
// that runs migrations ahead of the servers does; it needs DATABASE_URL.
func TestMigrateFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := NewMain().ParseFlags([]string{"--migrate"}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Errorf("--migrate without a database: %v; want an error naming DATABASE_URL", err)
	}

	dsn := pgtest.DSN(t)
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	name := fmt.Sprintf("migrate_flag_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)") }) //nolint:errcheck
	cfg := admin.Config()
	empty := fmt.Sprintf("host=%s port=%d user=%s password='%s' dbname=%s", cfg.Host, cfg.Port, cfg.User, cfg.Password, name)

	m := NewMain()
	m.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := m.ParseFlags([]string{"--migrate"}, func(k string) string {
		if k == "DATABASE_URL" {
			return empty
		}
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, empty)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var fn string
	if err := conn.QueryRow(ctx, `SELECT 'convo.append_block'::regproc::text`).Scan(&fn); err != nil {
		t.Errorf("the schema is not there after --migrate: %v", err)
	}
	if err := m.Migrate(ctx); err != nil {
		t.Errorf("migrating again: %v", err)
	}
}
