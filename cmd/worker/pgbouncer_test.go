package main

import (
	"context"
	"strings"
	"testing"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testwait"
)

// TestRunThroughPgBouncer runs the command with its pool through a real
// PgBouncer in transaction mode and its LISTEN connection on the direct
// URL: a message sent while it waits is answered at the notification
// (the poll interval is far longer than the test).
func TestRunThroughPgBouncer(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pooled := pgtest.PgBouncer(t, dsn)[0]
	m := NewMain()
	run(t, m, "--database-url", pooled, "--db-pool-mode", "transaction", "--direct-database-url", dsn,
		"--demo-tokens-per-second", "-1", "--poll-interval", "10m")
	t.Cleanup(func() { m.Close() })
	_, store := openStore(t, dsn)
	// The first reply may be claimed when the listener first connects
	// (the workers look for prompts then); the next ones are sent once
	// it listens, and only its notifications wake the workers.
	for i, text := range []string{"What is 3 * 3?", "And 4 * 4?", "And 5 * 5?"} {
		res := send(t, store, text)
		testwait.For(t, "reply "+string(rune('1'+i))+" to complete", func() bool {
			st, err := store.State(context.Background(), "local", res.ConversationID)
			if err != nil {
				t.Fatal(err)
			}
			return st.Messages[1].Status == conversation.MessageCompleted
		})
	}
}

// TestPoolModeSettings: --db-pool-mode takes session or transaction, and
// transaction needs the direct URL, each refusal naming the setting.
func TestPoolModeSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--database-url", "postgres://a/b", "--db-pool-mode", "transaction", "--direct-database-url", "postgres://c/b"}, ""},
		{[]string{"--database-url", "postgres://a/b", "--db-pool-mode", "transaction"}, "needs CONVO_DIRECT_DATABASE_URL"},
		{[]string{"--database-url", "postgres://a/b", "--db-pool-mode", "statement"}, `CONVO_DB_POOL_MODE (--db-pool-mode) is "statement"`},
	} {
		err := NewMain().ParseFlags(c.args, func(string) string { return "" })
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v; want an error saying %q", c.args, err, c.want)
		}
	}
}
