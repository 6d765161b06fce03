package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/worker"
	"github.com/convo-dev/convo/worker/builtin"
)

var (
	walkthroughRE = regexp.MustCompile("(?s)```sql walkthrough\n(.*?)```")
	shBlockRE     = regexp.MustCompile("(?s)```sh\n(.*?)```")
)

// readmeServerEnv returns the environment the README tells the reader to
// start the server with for the walkthrough: the NAME=value words before
// `make run` in the last sh block ahead of it.
func readmeServerEnv(t *testing.T, beforeWalkthrough []byte) map[string]string {
	t.Helper()
	blocks := shBlockRE.FindAllSubmatch(beforeWalkthrough, -1)
	if len(blocks) == 0 {
		t.Fatal("README.md shows no command to start the server before the walkthrough")
	}
	for line := range strings.Lines(string(blocks[len(blocks)-1][1])) {
		words := strings.Fields(line)
		i := slices.Index(words, "make")
		if i < 0 || i+1 >= len(words) || words[i+1] != "run" {
			continue
		}
		env := map[string]string{}
		for _, w := range words[:i] {
			name, value, ok := strings.Cut(w, "=")
			if !ok {
				t.Fatalf("README.md starts the server with %q: %q is not NAME=value", line, w)
			}
			env[name] = value
		}
		return env
	}
	t.Fatal("README.md's last sh block before the walkthrough does not start the server with make run")
	return nil
}

// TestReadmeWalkthrough runs the README's psql walkthrough, as a reader
// types it, next to the workers of a server started the way the README
// says (a default server's demo worker would take the prompt first), so
// the documentation cannot drift from the SQL worker API.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	loc := walkthroughRE.FindSubmatchIndex(readme)
	if loc == nil {
		t.Fatal("README.md has no ```sql walkthrough block")
	}
	walkthrough := readme[loc[2]:loc[3]]
	env := readmeServerEnv(t, readme[:loc[0]])

	t.Run("FreshDatabase", func(t *testing.T) {
		t.Parallel()
		runWalkthrough(t, walkthrough, env, 0)
	})
	// A reader who sent messages through the API before restarting the
	// server as the walkthrough asks may have left prompts in the queue:
	// the walkthrough answers the oldest, and still shows its events.
	t.Run("AfterEarlierMessages", func(t *testing.T) {
		t.Parallel()
		runWalkthrough(t, walkthrough, env, 2)
	})
}

// runWalkthrough queues leftover prompts, starts the workers env
// configures, and types the walkthrough into psql.
func runWalkthrough(t *testing.T, walkthrough []byte, env map[string]string, leftover int) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Fatal("psql is needed to run the README walkthrough: apt-get install postgresql-client")
	}
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	ctx := context.Background()
	for i := range leftover {
		if _, err := tb.pool.Exec(ctx, `SELECT convo.send_message('local', NULL, $1, '[{"model": "demo"}]')`, fmt.Sprintf("Sent earlier, %d", i)); err != nil {
			t.Fatal(err)
		}
	}

	// The server's in-process workers, configured as the README says.
	settings := worker.DefaultSettings()
	if err := settings.FromEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	cfg, err := builtin.Config(settings, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	workers, err := worker.Start(ctx, tb.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		workers.Stop(ctx) //nolint:errcheck
	})
	count := func(sql string) int {
		var n int
		if err := tb.pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Workers started next to leftover prompts would take them at once.
	for typing := time.Now(); leftover > 0 && time.Since(typing) < 2*time.Second && count(`SELECT count(*) FROM convo.prompts WHERE status <> 'queued'`) == 0; {
		time.Sleep(10 * time.Millisecond)
	}

	// The reader types the walkthrough: between queuing the message and
	// claiming a prompt, the workers have the time a person takes to type
	// the next statement, and a worker that is running takes the prompt.
	first, rest, ok := bytes.Cut(walkthrough, []byte("\\gset\n"))
	if !ok {
		t.Fatal("the walkthrough does not start with a statement ending in \\gset")
	}
	cmd := exec.Command(psql, "-X", "-v", "ON_ERROR_STOP=1", "--no-psqlrc", "-d", dsn)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write(append(first, "\\gset\n"...)); err != nil {
		t.Fatal(err)
	}
	claimed := count(`SELECT count(*) FROM convo.prompts WHERE status <> 'queued'`)
	queued := time.Now()
	for count(`SELECT count(*) FROM convo.prompts`) <= leftover {
		if time.Since(queued) > 30*time.Second {
			t.Fatalf("the walkthrough's first statement queued no prompt:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A person's pause before the next statement: over as soon as a
	// worker claims a prompt.
	for typing := time.Now(); time.Since(typing) < 2*time.Second && count(`SELECT count(*) FROM convo.prompts WHERE status <> 'queued'`) == claimed; {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := stdin.Write(rest); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("walkthrough failed: %v\n%s", err, out.String())
	}
	var convID string
	if err := tb.pool.QueryRow(ctx, `SELECT conversation_id::text FROM convo.prompts WHERE worker = 'psql-worker'`).Scan(&convID); err != nil {
		t.Fatalf("no prompt claimed by psql-worker: %v\n%s", err, out.String())
	}
	st := tb.state(t, mustUUID(t, convID))
	reply := st.Messages[1]
	if reply.Status != conversation.MessageCompleted {
		t.Fatalf("reply status = %s\n%s", reply.Status, out.String())
	}
	var got []string
	for _, b := range reply.Blocks {
		got = append(got, b.Type+": "+b.Content)
	}
	want := []string{
		"reasoning: The user wants a product. I will use the calculator.",
		`tool_use: {"expression": "6*7"}`,
		"tool_result: 42",
		"text: 6 times 7 is **42**.",
	}
	if !slices.Equal(got, want) {
		t.Errorf("blocks = %q\nwant %q", got, want)
	}
	if tc := reply.Blocks[1].ToolCall; tc == nil || tc.Output != "evaluating 6*7 … 42" {
		t.Errorf("tool call = %+v", tc)
	}
	if !strings.Contains(out.String(), "promptCompleted") {
		t.Errorf("walkthrough's last query does not list promptCompleted:\n%s", out.String())
	}
}
