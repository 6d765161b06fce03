package postgres_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
)

var walkthroughRE = regexp.MustCompile("(?s)```sql walkthrough\n(.*?)```")

// TestReadmeWalkthrough runs the README's psql walkthrough against a fresh
// database, so the documentation cannot drift from the SQL worker API.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := walkthroughRE.FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```sql walkthrough block")
	}
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Fatal("psql is needed to run the README walkthrough: apt-get install postgresql-client")
	}
	dsn := pgtest.DSN(t)
	cmd := exec.Command(psql, "-X", "-v", "ON_ERROR_STOP=1", "--no-psqlrc", "-d", dsn)
	cmd.Stdin = bytes.NewReader(m[1])
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("walkthrough failed: %v\n%s", err, out)
	}

	tb := setupDSN(t, dsn)
	var convID string
	if err := tb.pool.QueryRow(context.Background(), `SELECT id::text FROM convo.conversations`).Scan(&convID); err != nil {
		t.Fatal(err)
	}
	st := tb.state(t, mustUUID(t, convID))
	reply := st.Messages[1]
	if reply.Status != conversation.MessageCompleted {
		t.Fatalf("reply status = %s\n%s", reply.Status, out)
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
	if !strings.Contains(string(out), "promptCompleted") {
		t.Errorf("walkthrough's last query does not list promptCompleted:\n%s", out)
	}
}
