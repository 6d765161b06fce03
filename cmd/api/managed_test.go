package main

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/db"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testwait"
)

// TestManagedPostgres runs convo as a managed PostgreSQL lets it run: the
// migrations and the server as an ordinary role that owns an empty
// database (no superuser, no CREATEROLE, only the REPLICATION attribute
// the logical feed needs), the in-process workers as a login of the
// worker role an administrator made, and the logical feed
// (CONVO_FEED=logical) on the publications the migrations create. A sent
// message gets the demo worker's reply, which a stream sees live. The
// owner may turn the events' NOTIFY off only once granted the setting.
func TestManagedPostgres(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The administrator's part, as the cluster's superuser: an owner role
	// and its database, and a login of the worker role (which the
	// cluster's first migration created; a role belongs to the cluster).
	admin := pgtest.DSN(t)
	suffix := strconv.FormatUint(uint64(rand.Uint32()), 36)
	owner, login, dbName := "convo_owner_"+suffix, "convo_worker_login_"+suffix, "convo_managed_"+suffix
	exec := func(dsn, sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(admin, `CREATE ROLE `+owner+` LOGIN PASSWORD 'owner-pw' NOSUPERUSER NOCREATEROLE NOCREATEDB REPLICATION`)
	exec(admin, `CREATE DATABASE `+dbName+` OWNER `+owner)
	exec(admin, `CREATE ROLE `+login+` LOGIN PASSWORD 'worker-pw' IN ROLE `+db.WorkerRole)
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, `DROP DATABASE IF EXISTS `+dbName+` WITH (FORCE)`)         //nolint:errcheck // best effort
		conn.Exec(ctx, `REVOKE SET ON PARAMETER convo.notify_events FROM `+owner) //nolint:errcheck // as above
		conn.Exec(ctx, `DROP ROLE IF EXISTS `+login)                              //nolint:errcheck // as above
		conn.Exec(ctx, `DROP ROLE IF EXISTS `+owner)                              //nolint:errcheck // as above
	})
	as := func(user, password string) string {
		u, err := url.Parse(admin)
		if err != nil {
			t.Fatal(err)
		}
		u.User, u.Path = url.UserPassword(user, password), "/"+dbName
		return u.String()
	}
	ownerDSN, workerDSN := as(owner, "owner-pw"), as(login, "worker-pw")

	m := startMain(t, map[string]string{
		"DATABASE_URL": ownerDSN, "CONVO_WORKER_DATABASE_URL": workerDSN, "CONVO_FEED": "logical",
		"CONVO_DEMO_TOKENS_PER_SECOND": "1000",
	})
	// The roles are what they claim: the server's may not create roles
	// nor bypass anything, the workers' may not read a table.
	var super, createRole bool
	if err := m.pool.QueryRow(ctx, `SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user`).Scan(&super, &createRole); err != nil {
		t.Fatal(err)
	}
	if super || createRole {
		t.Fatalf("the server's role: superuser %v, createrole %v; want neither", super, createRole)
	}
	var readsTables bool
	if err := m.workerPool.QueryRow(ctx, `SELECT has_table_privilege('convo.prompts', 'SELECT')`).Scan(&readsTables); err != nil {
		t.Fatal(err)
	}
	if readsTables {
		t.Fatal("the workers' login may read convo.prompts; want a login of the worker role")
	}

	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	first, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "Hello"}))
	if err != nil {
		t.Fatal(err)
	}
	conv := first.Msg.ConversationId
	read := func() *convov1.GetConversationResponse {
		t.Helper()
		got, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: conv}))
		if err != nil {
			t.Fatal(err)
		}
		return got.Msg
	}
	testwait.Until(t, ctx, "the first reply to complete", func() bool {
		got := read()
		return len(got.Messages) == 2 && got.Messages[1].Status == "completed"
	})
	// The second reply, streamed live from a stream opened before it.
	f := &follower{conversationID: conv, blocks: map[string]string{}}
	stream, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: conv}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetSnapshot() == nil {
		t.Fatalf("the stream did not begin with a snapshot: %v", stream.Err())
	}
	f.apply(t, stream.Msg(), "")
	second, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: conv, Text: "What is 6 times 7?"}))
	if err != nil {
		t.Fatal(err)
	}
	done := false
	for !done && stream.Receive() {
		done = f.apply(t, stream.Msg(), second.Msg.PromptId)
	}
	if !done {
		t.Fatalf("the stream ended before the reply completed: %v", stream.Err())
	}
	got := read()
	reply := got.Messages[len(got.Messages)-1]
	if reply.Status != "completed" || len(reply.Blocks) == 0 {
		t.Fatalf("reply %s with %d blocks; want completed", reply.Status, len(reply.Blocks))
	}
	for _, b := range reply.Blocks {
		if f.blocks[b.Id] != b.Content {
			t.Errorf("block %s: the stream folds to %q, GetConversation reads %q", b.Id, f.blocks[b.Id], b.Content)
		}
	}
	// PostgreSQL 15 lets no role but a superuser ALTER DATABASE … SET a
	// custom setting: the server could not turn the events' NOTIFY off
	// (it logged so), and streams work all the same. Once granted the
	// setting (docs/deploy.md, "Managed PostgreSQL"), the owner may.
	var notifyOff bool
	if err := m.pool.QueryRow(ctx, `SELECT current_setting('convo.notify_events', true) = 'off'`).Scan(&notifyOff); err != nil {
		t.Fatal(err)
	}
	if notifyOff {
		t.Error("convo.notify_events is off without the grant; want it left on, the owner being refused")
	}
	exec(admin, `GRANT SET ON PARAMETER convo.notify_events TO `+owner)
	if changed, err := m.store.SetEventNotify(ctx, false); err != nil || !changed {
		t.Errorf("SetEventNotify(false) after the grant: changed %v, %v; want the database's setting changed", changed, err)
	}
	// The logical feed's slot is this server's, on the owner's login.
	var slots int
	if err := m.pool.QueryRow(ctx, `SELECT count(*)::int FROM pg_replication_slots WHERE database = current_database() AND temporary`).Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if slots != 1 {
		t.Errorf("%d temporary replication slots on the database; want the logical feed's one", slots)
	}
}
