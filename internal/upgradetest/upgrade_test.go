package upgradetest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testbin"
	"github.com/convo-dev/convo/internal/testwait"
)

func TestMain(m *testing.M) { pgtest.Main(m, testbin.Remove) }

// TestRollingUpgrade runs the upgrade of docs/deploy.md ("Upgrades") from
// PreviousRelease to this release on one database, with traffic
// throughout:
//
//  1. the previous release's server (with its in-process demo workers)
//     serves a fresh database and streams a reply, read from it;
//  2. this release's --migrate runs meanwhile, while messages keep
//     arriving at the previous server;
//  3. the previous server sends and its workers complete a reply on the
//     migrated database;
//  4. this release's server starts beside it: messages go through both,
//     into conversations begun on either, each conversation streamed from
//     both servers;
//  5. the previous server stops, and this release's workers reply alone.
//
// It asserts that no request and no reply failed, that every reader's
// fold equals GetConversation on both servers, and that the workers of
// both releases completed replies.
func TestRollingUpgrade(t *testing.T) {
	t.Parallel()
	previous := buildPrevious(t)
	current := testbin.Build(t, "github.com/convo-dev/convo/cmd/api")
	dsn := emptyDatabase(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// One user sends every message: no per-user limit may refuse them.
	env := []string{"DATABASE_URL=" + dsn, "CONVO_WORKERS=4", "CONVO_DEMO_TOKENS_PER_SECOND=150", "CONVO_LOG_LEVEL=info",
		"CONVO_WRITE_RATE=0", "CONVO_MAX_ACTIVE_PROMPTS=0"}
	send := func(s *server, conversation, text string) *convov1.SendMessageResponse {
		t.Helper()
		res, err := clientOf(s).SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: conversation, Text: text}))
		if err != nil {
			t.Fatalf("SendMessage through the %s server: %v", s.name, err)
		}
		return res.Msg
	}
	promptStatus := func(prompt string) string {
		var status string
		if err := conn.QueryRow(ctx, "SELECT status FROM convo.prompts WHERE id = $1", prompt).Scan(&status); err != nil {
			t.Fatal(err)
		}
		return status
	}
	idle := func(what string) {
		t.Helper()
		testwait.Until(t, ctx, what, func() bool {
			var open int
			err := conn.QueryRow(ctx, "SELECT count(*) FROM convo.prompts WHERE status IN ('queued', 'running')").Scan(&open)
			return err == nil && open == 0
		})
	}
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	var readers []*reader

	// 1. The previous release serves alone; a reply streams.
	old := startServer(t, "previous release's", previous, env...)
	first := send(old, "", "Tell me about the weather in Lisbon")
	readers = append(readers, follow(readCtx, old, first.ConversationId))
	testwait.Until(t, ctx, "the first reply to stream", func() bool { return promptStatus(first.PromptId) == "running" })

	// 2. This release migrates the database while the previous one
	// streams that reply and takes messages.
	var (
		wg       sync.WaitGroup
		sendErrs []error
		during   int
	)
	migrated := make(chan struct{})
	wg.Go(func() {
		client := clientOf(old)
		// At most 50, one every 100 ms: a slow migration (the race
		// detector's) must not queue more replies than the test waits for.
		for i := 0; i < 50; i++ {
			_, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: fmt.Sprintf("a question during the migration, %d", i)}))
			if err != nil {
				sendErrs = append(sendErrs, err)
			}
			during++
			select {
			case <-migrated:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	migrate := exec.CommandContext(ctx, current, "--migrate")
	migrate.Env = append(os.Environ(), "DATABASE_URL="+dsn)
	out, err := migrate.CombinedOutput()
	close(migrated)
	wg.Wait()
	if err != nil {
		t.Fatalf("this release's --migrate: %v\n%s", err, out)
	}
	if err := errors.Join(sendErrs...); err != nil {
		t.Fatalf("%d of %d messages sent to the previous server during the migration failed: %v\nthe previous server's log:\n%s\nthe migration's output:\n%s",
			len(sendErrs), during, err, old.log(), out)
	}
	if status := promptStatus(first.PromptId); status != "running" {
		t.Logf("the first reply was %s when the migration ended (it should stream through it: slow the demo model down)", status)
	}
	t.Logf("%d messages sent to the previous server during the migration", during)

	// 3. The previous release on the migrated database, alone: its
	// workers claim what it sends.
	second := send(old, "", "A question after the migration: how tall is Mont Blanc?")
	readers = append(readers, follow(readCtx, old, second.ConversationId))
	testwait.Until(t, ctx, "the previous release's workers to claim a reply after the migration",
		func() bool { return promptStatus(second.PromptId) != "queued" })

	// 4. Both releases side by side.
	cur := startServer(t, "this release's", current, env...)
	readers = append(readers, follow(readCtx, cur, first.ConversationId), follow(readCtx, cur, second.ConversationId))
	third := send(cur, "", "Sent to this release: count the words in this sentence")
	fourth := send(old, "", "Sent to the previous release: what is 12 * 7?")
	for _, c := range []string{third.ConversationId, fourth.ConversationId} {
		readers = append(readers, follow(readCtx, old, c), follow(readCtx, cur, c))
	}
	idle("the replies to end")
	send(cur, first.ConversationId, "A follow-up through this release")
	send(cur, second.ConversationId, "A follow-up through this release")
	send(old, third.ConversationId, "A follow-up through the previous release")
	send(old, fourth.ConversationId, "A follow-up through the previous release")
	send(cur, fourth.ConversationId, "Another one through this release")
	idle("the follow-ups to end")

	var prompts, completed, byOld int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'completed'),
		count(*) FILTER (WHERE status = 'completed' AND worker LIKE format('%%-%s-%%', $1::int))
		FROM convo.prompts`, old.cmd.Process.Pid).Scan(&prompts, &completed, &byOld); err != nil {
		t.Fatal(err)
	}
	if completed != prompts {
		t.Errorf("%d of %d replies completed; the others failed or were cancelled", completed, prompts)
	}
	var oldAfterMigration bool
	if err := conn.QueryRow(ctx, "SELECT worker LIKE format('%%-%s-%%', $2::int) FROM convo.prompts WHERE id = $1",
		second.PromptId, old.cmd.Process.Pid).Scan(&oldAfterMigration); err != nil {
		t.Fatal(err)
	}
	if !oldAfterMigration {
		t.Error("the reply sent after the migration was not completed by the previous release's workers")
	}

	for _, r := range readers {
		for _, s := range []*server{old, cur} {
			var last string
			testwait.Until(t, ctx, fmt.Sprintf("the fold of %s read from the %s server to equal GetConversation on the %s server", r.conversation, r.server.name, s.name),
				func() bool {
					got, err := clientOf(s).GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: r.conversation}))
					if err != nil {
						last = err.Error()
						return false
					}
					last = r.differs(got.Msg)
					return last == ""
				})
			if last != "" {
				t.Errorf("%s from the %s server: %s", r.conversation, r.server.name, last)
			}
		}
	}
	stopReading()

	// 5. The previous release stops; this one's workers reply.
	old.stop(t)
	fifth := send(cur, third.ConversationId, "Only this release is left: what is 3 + 4?")
	idle("the last reply to end")
	var byCurrent bool
	if err := conn.QueryRow(ctx, "SELECT status = 'completed' AND worker LIKE format('%%-%s-%%', $2::int) FROM convo.prompts WHERE id = $1",
		fifth.PromptId, cur.cmd.Process.Pid).Scan(&byCurrent); err != nil {
		t.Fatal(err)
	}
	if !byCurrent {
		t.Errorf("the last reply (%s) was not completed by this release's workers", promptStatus(fifth.PromptId))
	}
	cur.stop(t)
	t.Logf("%d replies, %d by the previous release's workers; %d readers; the upgrade took %s after the builds",
		prompts+1, byOld, len(readers), time.Since(began).Round(100*time.Millisecond))
}

func clientOf(s *server) convov1connect.ConversationServiceClient {
	return convov1connect.NewConversationServiceClient(http.DefaultClient, s.url)
}
