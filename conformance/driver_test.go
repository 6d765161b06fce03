package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/postgres"
)

// The runner's settings (README.md, Runners), the same for every scenario
// but its slots.
const (
	leaseSeconds    = 10
	batchIntervalMs = 20
	drainTimeout    = time.Second
)

// Generous bounds for what a runner does, on a loaded machine: a bound
// passed fails the scenario, and none is an assertion on speed.
const (
	readyTimeout  = 60 * time.Second
	actionTimeout = 30 * time.Second
	settleTimeout = 30 * time.Second
	exitTimeout   = drainTimeout + 15*time.Second
)

// owner is the user the driver sends as: the single-user mode's, so that
// the in-process Connect handler (which authenticates nobody) reads the
// conversations as theirs.
const owner = "local"

// reply is one conversation the driver sent the script to.
type reply struct {
	conversationID, promptID, messageID uuid.UUID
}

// scenarioRun is one scenario against one runner.
type scenarioRun struct {
	t      *testing.T
	sc     Scenario
	db     *pgxpool.Pool
	store  *postgres.Store
	client *client
	proxy  *Proxy
	runner *runnerProcess
}

// runScenario runs sc against the runner exe: a database of its own, the
// fault proxy in front of it, the runner, the script sent as the user's
// message, the action, and the conversation compared with the
// expectation.
func runScenario(t *testing.T, runtimeName, exe string, sc Scenario) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatalf("open the database: %v", err)
	}
	t.Cleanup(db.Close)
	store := postgres.New(db)
	run := &scenarioRun{t: t, sc: sc, db: db, store: store, client: newClient(t, store)}

	target, runnerURL := proxiedURL(t, dsn)
	if run.proxy, err = NewProxy(target); err != nil {
		t.Fatalf("start the fault proxy: %v", err)
	}
	t.Cleanup(func() { run.proxy.Close() })
	runnerURL.Host = run.proxy.Addr()
	if sc.Action != nil && sc.Action.Kind == ActionCutAfterCommit {
		installCut(t, db)
	}

	run.runner = startRunner(t, exe, map[string]string{
		"DATABASE_URL":            runnerURL.String(),
		"CONVO_WORKER_ID":         "conformance-" + runtimeName + "-" + sc.Name,
		"CONVO_WORKER_SLOTS":      strconv.Itoa(sc.Slots),
		"CONVO_LEASE_SECONDS":     strconv.Itoa(leaseSeconds),
		"CONVO_BATCH_INTERVAL_MS": strconv.Itoa(batchIntervalMs),
		"CONVO_DRAIN_TIMEOUT_MS":  strconv.Itoa(int(drainTimeout / time.Millisecond)),
	})
	run.runner.waitReady(t, readyTimeout)

	var replies []reply
	for range sc.Replies {
		replies = append(replies, run.send(sc.Script, run.upload(sc.Files)...))
	}
	if sc.Action != nil {
		run.act(replies[0])
	}
	for _, r := range replies {
		run.waitSettled(r, settleTimeout)
	}
	if sc.Action != nil && sc.Action.Kind == ActionCutAfterCommit {
		run.checkResent()
	}
	if len(sc.FollowUp) > 0 {
		r := run.send(sc.FollowUp)
		run.waitSettled(r, settleTimeout)
		if got := run.client.prompt(t, r.promptID); got.GetStatus() != "completed" {
			t.Errorf("followUp: the prompt is %s (error %q), want completed: the runner stopped serving, or its slot was not freed",
				got.GetStatus(), got.GetError())
		}
	}
	for i, r := range replies {
		run.client.compare(t, fmt.Sprintf("reply %d of %d", i+1, len(replies)), r, sc.Expect)
	}
	if sc.SharedTransactions {
		run.checkSharedTransactions(replies)
	}
}

// proxiedURL returns the host:port the proxy forwards to and the
// runner's connection URL, whose host the caller points at the proxy.
func proxiedURL(t *testing.T, dsn string) (string, *url.URL) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse the test database's DSN: %v", err)
	}
	if strings.HasPrefix(cfg.Host, "/") {
		t.Fatalf("the test database is reached through a Unix socket (%s): the conformance suite's proxy needs TCP", cfg.Host)
	}
	u := &url.URL{Scheme: "postgres", User: url.UserPassword(cfg.User, cfg.Password), Path: "/" + cfg.Database}
	if cfg.Password == "" {
		u.User = url.User(cfg.User)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), u
}

// upload stores the files as the owner's uploads, through files.Service
// on the scenario's database, as the HTTP route does, and returns their
// ids.
func (run *scenarioRun) upload(fs []ScenarioFile) []uuid.UUID {
	svc := files.NewService(files.Options{Store: postgres.NewFileStore(run.db), Blobs: postgres.NewFileBlobs(run.db)})
	var ids []uuid.UUID
	for _, f := range fs {
		up, err := svc.Upload(context.Background(), owner, f.Filename, "", strings.NewReader(f.Content))
		if err != nil {
			run.t.Fatalf("upload %s: %v", f.Filename, err)
		}
		ids = append(ids, up.ID)
	}
	return ids
}

// send creates a conversation and sends script as its user's message,
// holding fileIDs, through the client API, as an app would.
func (run *scenarioRun) send(script json.RawMessage, fileIDs ...uuid.UUID) reply {
	t := run.t
	t.Helper()
	ctx := context.Background()
	conv, err := run.store.CreateConversation(ctx, owner, run.sc.Name)
	if err != nil {
		t.Fatalf("create a conversation: %v", err)
	}
	res, err := run.store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: owner, ConversationID: conv.ID, Text: string(script), FileIDs: fileIDs,
		ModelConfigs: []json.RawMessage{json.RawMessage(`{}`)},
	})
	if err != nil {
		t.Fatalf("send the script: %v", err)
	}
	return reply{conversationID: conv.ID, promptID: res.PromptIDs[0], messageID: res.AssistantMessageIDs[0]}
}

// act waits for the reply to show the action's text, then does it.
func (run *scenarioRun) act(r reply) {
	t, a := run.t, run.sc.Action
	t.Helper()
	run.waitText(r, a.When)
	ctx := context.Background()
	switch a.Kind {
	case ActionCancel:
		if _, err := run.store.CancelPrompt(ctx, owner, r.promptID); err != nil {
			t.Fatalf("cancel the prompt: %v", err)
		}
	case ActionExpireLease:
		run.expireLease(r)
	case ActionCutAfterCommit:
		run.cutAfterCommit()
	case ActionRestart:
		run.proxy.Restart(time.Second)
	case ActionSigterm:
		if err := run.runner.signal(syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM: %v", err)
		}
		code, err := run.runner.waitExit(exitTimeout)
		if err != nil {
			t.Fatalf("after SIGTERM: %v within %s (CONVO_DRAIN_TIMEOUT_MS is %d)", err, exitTimeout, drainTimeout.Milliseconds())
		}
		if code != *run.sc.ExitCode {
			t.Errorf("after SIGTERM the runner exited with status %d, want %d", code, *run.sc.ExitCode)
		}
	case ActionApprove, ActionDeny:
		run.answerPause(r)
	case ActionSigkill:
		run.runner.kill()
		if _, err := run.runner.waitExit(exitTimeout); err != nil {
			t.Fatalf("after SIGKILL: %v", err)
		}
		run.letLeaseRunOut(r)
	}
}

// waitText waits until the reply's text blocks, joined, start with want.
// A reply that settles first fails the scenario.
func (run *scenarioRun) waitText(r reply, want string) {
	t := run.t
	t.Helper()
	deadline := time.Now().Add(actionTimeout)
	for {
		msg := run.client.message(t, r)
		var text strings.Builder
		for _, b := range msg.GetBlocks() {
			if b.GetBlockType() == "text" {
				text.WriteString(b.GetContent())
			}
		}
		if strings.HasPrefix(text.String(), want) {
			return
		}
		if p := run.client.prompt(t, r.promptID); settled(p.GetStatus()) {
			t.Fatalf("the prompt settled (%s, error %q) before its text showed %q for the action %s; it showed %q",
				p.GetStatus(), p.GetError(), want, run.sc.Action.Kind, text.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reply did not show %q within %s for the action %s; it shows %q", want, actionTimeout, run.sc.Action.Kind, text.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func settled(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// waitSettled waits until the reply's prompt is completed, failed or
// cancelled.
func (run *scenarioRun) waitSettled(r reply, timeout time.Duration) {
	t := run.t
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p := run.client.prompt(t, r.promptID)
		if settled(p.GetStatus()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prompt %s is still %s after %s", r.promptID, p.GetStatus(), timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// expireLease makes the reply's lease run out now, and has the database
// fail it as the lease reaper would, in one transaction that first takes
// the conversation's lock, as write_batch does: expire_leases skips a
// conversation another transaction holds (a batch in flight), and apart,
// the runner's next heartbeat would extend the lease again.
func (run *scenarioRun) expireLease(r reply) {
	t := run.t
	t.Helper()
	ctx := context.Background()
	tx, err := run.db.Begin(ctx)
	if err != nil {
		t.Fatalf("expire the lease: %v", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	var n int
	if _, err := tx.Exec(ctx, `SELECT 1 FROM convo.conversations c JOIN convo.prompts p ON p.conversation_id = c.id
	                            WHERE p.id = $1 FOR NO KEY UPDATE OF c`, r.promptID); err != nil {
		t.Fatalf("lock the conversation: %v", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE convo.prompts SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, r.promptID); err != nil {
		t.Fatalf("expire the lease: %v", err)
	}
	if err := tx.QueryRow(ctx, `SELECT convo.expire_leases()`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("expire_leases failed %d prompts (%v), want 1", n, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("expire the lease: %v", err)
	}
}

// letLeaseRunOut waits, after a SIGKILL, for the dead runner's lease to
// run out, calling expire_leases (as the servers' reaper does) until the
// prompt is failed.
func (run *scenarioRun) letLeaseRunOut(r reply) {
	t := run.t
	t.Helper()
	deadline := time.Now().Add(time.Duration(leaseSeconds)*time.Second + settleTimeout)
	for {
		if _, err := run.store.ExpireLeases(context.Background()); err != nil {
			t.Fatalf("expire_leases: %v", err)
		}
		if settled(run.client.prompt(t, r.promptID).GetStatus()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed runner's prompt was not failed by expire_leases within %s", time.Until(deadline))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkSharedTransactions checks that some transaction wrote deltas of
// two replies or more: the runtime batched its replies' writes.
func (run *scenarioRun) checkSharedTransactions(replies []reply) {
	t := run.t
	t.Helper()
	var ids []uuid.UUID
	for _, r := range replies {
		ids = append(ids, r.conversationID)
	}
	var shared, transactions int
	err := run.db.QueryRow(context.Background(), `
SELECT count(*) FILTER (WHERE conversations > 1), count(*)
  FROM (SELECT count(DISTINCT conversation_id) AS conversations
          FROM convo.events
         WHERE kind = 'blockDelta' AND conversation_id = ANY($1)
         GROUP BY xmin::text) tx`, ids).Scan(&shared, &transactions)
	if err != nil {
		t.Fatalf("count the transactions of the deltas: %v", err)
	}
	if shared == 0 {
		t.Errorf("sharedTransactions: each of the %d transactions that wrote deltas wrote one reply's only; want replies written together (convo.write_batch)", transactions)
	}
}
