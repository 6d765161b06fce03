package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testwait"
	"github.com/convo-dev/convo/wire/view"
)

// TestBackupRestore takes a pg_dump of a live database while replies
// stream and one waits for an approval, lets the original go on writing,
// restores the dump into a new database and serves it, as
// docs/deploy.md's "Backups" says:
//   - the restored log is the original's up to the dump, seq for seq;
//   - the replies that were running fail at once with a lease error, the
//     completed ones are intact, and the paused one completes when it is
//     approved on the restored server;
//   - a client that read the original past the dump and resumes after its
//     last seq gets a snapshot, not the restored events after that seq
//     (which are not the ones it read), and every stream folds to what
//     GetConversation reads, before and after a new reply.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster := pgtest.Cluster(t)
	src := pgtest.DSN(t)
	original := startMain(t, map[string]string{
		"DATABASE_URL": src, "CONVO_WORKERS": "8", "CONVO_DEMO_TOKENS_PER_SECOND": "20",
		"CONVO_MAX_ACTIVE_PROMPTS": "0", "CONVO_WRITE_RATE": "0", "CONVO_COMPACT_AFTER": "1h",
	})
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, original.URL())
	srcDB, err := pgxpool.New(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	defer srcDB.Close()
	send := func(c convov1connect.ConversationServiceClient, req *convov1.SendMessageRequest) *convov1.SendMessageResponse {
		t.Helper()
		res, err := c.SendMessage(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg
	}
	status := func(db *pgxpool.Pool, prompt string) (status, errText string) {
		t.Helper()
		if err := db.QueryRow(ctx, `SELECT status, coalesce(error, '') FROM convo.prompts WHERE id = $1`, prompt).Scan(&status, &errText); err != nil {
			t.Fatal(err)
		}
		return status, errText
	}

	// A short reply that completes before the dump, one that waits for
	// an approval, and three that are being written when it is taken.
	short := int32(3)
	done := send(client, &convov1.SendMessageRequest{Text: "What is 2 times 7?", Model: &convov1.ModelConfig{MaxTokens: &short}})
	testwait.Until(t, ctx, "the short reply to complete", func() bool { s, _ := status(srcDB, done.PromptId); return s == "completed" })
	paused := send(client, &convov1.SendMessageRequest{Text: "/approve a note for the backup"})
	var running []*convov1.SendMessageResponse
	for i := range 3 {
		running = append(running, send(client, &convov1.SendMessageRequest{Text: fmt.Sprintf("What is %d times 7?", i+3)}))
	}
	testwait.Until(t, ctx, "the replies to stream and the approval to be asked", func() bool {
		var streaming, waiting int
		err := srcDB.QueryRow(ctx, `SELECT (SELECT count(DISTINCT prompt_id) FROM convo.events WHERE kind = 'blockDelta' AND prompt_id::text = ANY($1)),
			(SELECT count(*) FROM convo.prompts WHERE id = $2 AND waiting)`,
			[]string{running[0].PromptId, running[1].PromptId, running[2].PromptId}, paused.PromptId).Scan(&streaming, &waiting)
		return err == nil && streaming == len(running) && waiting == 1
	})
	// A reader of the first running reply, on the original.
	reader := &follower{conversationID: running[0].ConversationId, blocks: map[string]string{}}
	readerStream, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: reader.conversationID}))
	if err != nil {
		t.Fatal(err)
	}
	defer readerStream.Close()

	dump := filepath.Join(t.TempDir(), "convo.dump")
	if out, err := exec.CommandContext(ctx, cluster.Tool("pg_dump"), "--format=custom", "--file="+dump, "--dbname="+src).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	// At least what the dump holds: the replies go on writing.
	dumped := lastSeqs(t, ctx, srcDB)
	for _, r := range running {
		if s, _ := status(srcDB, r.PromptId); s != "running" {
			t.Fatalf("reply %s was %s when the dump ended: the test would prove nothing", r.PromptId, s)
		}
	}
	// The original goes on: the reader reads past what the dump holds.
	for readerStream.Receive() {
		reader.apply(t, readerStream.Msg(), running[0].PromptId)
		if reader.seq > dumped[reader.conversationID]+5 {
			break
		}
	}
	if reader.seq <= dumped[reader.conversationID]+5 {
		t.Fatalf("the reader stopped at seq %d (the dump holds %d): %v", reader.seq, dumped[reader.conversationID], readerStream.Err())
	}
	readerStream.Close()
	original.Close()

	// Restored into a new database of the same cluster (its roles exist).
	restoredName := "restored_" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")
	if err := cluster.CreateDatabase(ctx, restoredName); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + restoredName
	dst := u.String()
	if out, err := exec.CommandContext(ctx, cluster.Tool("pg_restore"), "--exit-on-error", "--dbname="+dst, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	dstDB, err := pgxpool.New(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer dstDB.Close()
	// The restored log is the original's up to the dump, seq for seq.
	inDump := lastSeqs(t, ctx, dstDB)
	for conv, last := range inDump {
		if a, b := eventLog(t, ctx, srcDB, conv, last), eventLog(t, ctx, dstDB, conv, last); a != b {
			t.Errorf("conversation %s: the restored log differs from the original's up to seq %d", conv, last)
		}
	}

	restored := startMain(t, map[string]string{
		"DATABASE_URL": dst, "CONVO_WORKERS": "4", "CONVO_DEMO_TOKENS_PER_SECOND": "1000",
	})
	client = convov1connect.NewConversationServiceClient(http.DefaultClient, restored.URL())
	for conv, last := range lastSeqs(t, ctx, dstDB) {
		if last < inDump[conv]+1<<40 {
			t.Errorf("conversation %s: seq %d after the restore, %d in the dump: want it moved past 2^40", conv, last, inDump[conv])
		}
	}
	for _, r := range running {
		if s, e := status(dstDB, r.PromptId); s != "failed" || !strings.Contains(e, "lease expired") {
			t.Errorf("reply %s running at the dump: %s %q after the restore; want failed with a lease error", r.PromptId, s, e)
		}
	}
	if s, _ := status(dstDB, done.PromptId); s != "completed" {
		t.Errorf("the reply completed before the dump is %s after the restore", s)
	}

	// The reader's conversation goes on past the seq the reader read on
	// the original; the reader then resumes after that seq: a snapshot,
	// since the restored events after it are not those it read.
	next := send(client, &convov1.SendMessageRequest{ConversationId: reader.conversationID, Text: "What is 6 times 7?"})
	testwait.Until(t, ctx, "the reply on the restored server to complete", func() bool {
		s, _ := status(dstDB, next.PromptId)
		return s == "completed"
	})
	// Without the jump, the log would now be past the reader's seq.
	if last := lastSeqs(t, ctx, dstDB)[reader.conversationID] % (1 << 40); last <= reader.seq {
		t.Fatalf("the restored conversation is at seq 2^40 + %d, the reader at %d: the resume would prove nothing", last, reader.seq)
	}
	resumed, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: reader.conversationID, AfterSeq: &reader.seq}))
	if err != nil {
		t.Fatal(err)
	}
	if !resumed.Receive() || resumed.Msg().GetSnapshot() == nil {
		t.Errorf("a resume after seq %d (past the restored log) began with %v (%v); want a snapshot", reader.seq, resumed.Msg(), resumed.Err())
	}
	resumed.Close()

	// Every conversation streams from the restored server, and goes on:
	// the paused reply completes once approved, each stream folding to what GetConversation reads.
	convs := []string{done.ConversationId, paused.ConversationId}
	for _, r := range running {
		convs = append(convs, r.ConversationId)
	}
	watches := make([]*watch, len(convs))
	for i, conv := range convs {
		watches[i] = startWatch(t, ctx, client, conv)
	}
	read := func(conv string) *convov1.GetConversationResponse {
		t.Helper()
		res, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: conv, IncludePauseEvents: true}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg
	}
	pending := read(paused.ConversationId).PendingInputs
	if len(pending) != 1 {
		t.Fatalf("the paused reply has %d pending inputs after the restore; want its approval", len(pending))
	}
	approve := &convov1.InputAnswer{Kind: &convov1.InputAnswer_Approval{Approval: &convov1.ApprovalAnswer{Approved: true}}}
	if _, err := client.AnswerInput(ctx, connect.NewRequest(&convov1.AnswerInputRequest{ToolCallId: pending[0].ToolCallId, Answer: approve})); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, ctx, "the approved reply to complete", func() bool {
		s, _ := status(dstDB, paused.PromptId)
		return s == "completed"
	})
	for i, conv := range convs {
		want := render(view.New(&convov1.Snapshot{Messages: read(conv).Messages}))
		testwait.Until(t, ctx, "the stream to fold to GetConversation", func() bool { return watches[i].render() == want })
	}
}

// watch folds one conversation's StreamConversation.
type watch struct {
	mu   sync.Mutex
	conv *view.Conversation
	err  error
}

func startWatch(t *testing.T, ctx context.Context, client convov1connect.ConversationServiceClient, conv string) *watch {
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	stream, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: conv}))
	if err != nil {
		t.Fatal(err)
	}
	w := &watch{}
	go func() {
		defer stream.Close()
		for stream.Receive() {
			w.mu.Lock()
			if snap := stream.Msg().GetSnapshot(); snap != nil {
				w.conv = view.New(snap)
			} else if w.conv != nil {
				w.conv.Apply(w.conv.Read(stream.Msg().GetEvent())...)
			}
			w.mu.Unlock()
		}
		w.mu.Lock()
		w.err = stream.Err()
		w.mu.Unlock()
	}()
	return w
}

func (w *watch) render() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conv == nil {
		return fmt.Sprintf("(no snapshot: %v)", w.err)
	}
	return render(w.conv)
}

// render writes what a reader sees of c: each message's role and status,
// and its blocks' content and output.
func render(c *view.Conversation) string {
	var b strings.Builder
	for _, m := range c.Messages {
		fmt.Fprintf(&b, "%s %s %s %q\n", m.ID, m.Role, m.Status, m.Error)
		for _, bl := range m.Blocks {
			fmt.Fprintf(&b, "  %s %s %q %q\n", bl.ID, bl.Type, bl.Content(), bl.Output())
		}
	}
	return b.String()
}

// lastSeqs reads every conversation's last seq.
func lastSeqs(t *testing.T, ctx context.Context, db *pgxpool.Pool) map[string]int64 {
	t.Helper()
	rows, err := db.Query(ctx, `SELECT id::text, last_seq FROM convo.conversations`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seqs := map[string]int64{}
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		seqs[id] = seq
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return seqs
}

// eventLog is conversation conv's log up to seq last, one line per event.
func eventLog(t *testing.T, ctx context.Context, db *pgxpool.Pool, conv string, last int64) string {
	t.Helper()
	rows, err := db.Query(ctx, `SELECT seq, kind, payload::text FROM convo.events WHERE conversation_id = $1 AND seq <= $2 ORDER BY seq`, conv, last)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var seq int64
		var kind, payload string
		if err := rows.Scan(&seq, &kind, &payload); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%d %s %s", seq, kind, payload))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 {
		t.Fatalf("conversation %s has no events up to %d", conv, last)
	}
	return strings.Join(slices.Clip(lines), "\n")
}
