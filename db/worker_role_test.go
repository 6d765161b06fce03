package db_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/db"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/pgembed"
)

// workerAPI is what the worker role may call: the SQL worker API of
// docs/worker-api.md, and nothing else.
var workerAPI = []string{
	"append_block", "claim_prompt", "claim_prompts", "complete_prompt", "complete_tool_call", "end_block",
	"expire_leases", "fail_prompt", "fail_tool_call", "file_chunk", "heartbeat", "prompt_files", "prompt_inputs", "prompt_status", "prompt_trace",
	"release_prompt", "request_input", "start_block", "start_prompt", "start_tool_call", "tool_call_progress",
	"wait_prompt", "worker_batch_mark", "worker_context", "worker_heartbeat", "worker_prompt_read", "worker_reply", "write_batch",
}

// send queues a prompt of a new conversation of owner on the owner's
// connection, and returns its conversation and prompt.
func send(t *testing.T, conn *pgx.Conn, owner, text string) (conversationID, promptID string) {
	t.Helper()
	if err := conn.QueryRow(context.Background(),
		`SELECT conversation_id::text, prompt_ids[1]::text FROM convo.send_message($1, NULL, $2, '[{"provider": "demo"}]')`,
		owner, text).Scan(&conversationID, &promptID); err != nil {
		t.Fatalf("send_message: %v", err)
	}
	return conversationID, promptID
}

// sqlState returns the SQLSTATE of err, or "" when it has none.
func sqlState(err error) string {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgErr.Code
	}
	return ""
}

// TestWorkerRoleWritesAWholeReply runs a whole reply, with a tool call, a
// pause for approval and its resume, on a connection of the worker role:
// the grants are enough for everything a worker does, and the functions,
// running as their owner, still fire their triggers and notify.
func TestWorkerRoleWritesAWholeReply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	owner := connect(t, dsn)
	w := connect(t, pgtest.WorkerDSN(t, dsn))
	_, promptID := send(t, owner, "alice", "What is 2+2?")

	listener := connect(t, pgtest.WorkerDSN(t, dsn))
	if _, err := listener.Exec(ctx, "LISTEN convo_events"); err != nil {
		t.Fatalf("LISTEN as the worker role: %v", err)
	}

	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := w.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var claimed string
	var resumed bool
	if err := w.QueryRow(ctx, `SELECT c.prompt_id::text,
			EXISTS (SELECT 1 FROM convo.prompt_inputs(c.prompt_id, 'w1')) FROM convo.claim_prompts('w1', 30, 1) c`).
		Scan(&claimed, &resumed); err != nil || claimed != promptID || resumed {
		t.Fatalf("claim_prompts = %s resumed %v, %v; want %s not resumed", claimed, resumed, err, promptID)
	}
	var contextRows int
	var text string
	if err := w.QueryRow(ctx, `SELECT count(*), string_agg(content, '') FROM convo.worker_context($1, 'w1')`, promptID).
		Scan(&contextRows, &text); err != nil || contextRows != 1 || text != "What is 2+2?" {
		t.Fatalf("worker_context = %d rows %q, %v; want the user's message", contextRows, text, err)
	}
	exec(`SELECT convo.start_prompt($1)`, promptID)
	var block string
	if err := w.QueryRow(ctx, `SELECT convo.start_block($1, 'text')`, promptID).Scan(&block); err != nil {
		t.Fatal(err)
	}
	exec(`SELECT convo.append_block($1, 'Let me ', 1)`, block)
	exec(`SELECT convo.append_block($1, 'compute.', 2)`, block)
	exec(`SELECT convo.end_block($1, '{"tokens": 2}')`, block)
	var toolBlock, call string
	if err := w.QueryRow(ctx, `SELECT convo.start_block($1, 'tool_use', '{"callId": "c1"}')`, promptID).Scan(&toolBlock); err != nil {
		t.Fatal(err)
	}
	exec(`SELECT convo.end_block($1)`, toolBlock)
	if err := w.QueryRow(ctx, `SELECT convo.start_tool_call($1, 'calculator', '{"expression": "2+2"}')`, toolBlock).Scan(&call); err != nil {
		t.Fatal(err)
	}
	exec(`SELECT convo.request_input($1, 'approval', '{"message": "Run the calculator?"}')`, call)
	var parked bool
	if err := w.QueryRow(ctx, `SELECT convo.wait_prompt($1, 'w1')`, promptID).Scan(&parked); err != nil || !parked {
		t.Fatalf("wait_prompt = %v, %v; want parked", parked, err)
	}
	if _, err := owner.Exec(ctx, `SELECT convo.answer_input('alice', $1, '{"approved": true}')`, call); err != nil {
		t.Fatalf("answer_input, the owner's: %v", err)
	}

	// Another worker, which keeps a process lease, resumes it, reading
	// the answer and the reply so far.
	var live bool
	if err := w.QueryRow(ctx, `SELECT convo.worker_heartbeat('w2', 30, true)`).Scan(&live); err != nil || !live {
		t.Fatalf("worker_heartbeat = %v, %v", live, err)
	}
	if err := w.QueryRow(ctx, `SELECT c.prompt_id::text,
			EXISTS (SELECT 1 FROM convo.prompt_inputs(c.prompt_id, 'w2')) FROM convo.claim_prompts('w2', 30, 1) c`).
		Scan(&claimed, &resumed); err != nil || claimed != promptID || !resumed {
		t.Fatalf("claim_prompts = %s resumed %v, %v; want %s resumed", claimed, resumed, err, promptID)
	}
	exec(`SELECT convo.start_prompt($1)`, promptID)
	var status string
	if err := w.QueryRow(ctx, `SELECT status FROM convo.prompt_inputs($1, 'w2')`, promptID).Scan(&status); err != nil || status != "answered" {
		t.Fatalf("prompt_inputs = %q, %v; want answered", status, err)
	}
	var replyBlocks int
	if err := w.QueryRow(ctx, `SELECT count(*) FROM convo.worker_reply($1, 'w2')`, promptID).Scan(&replyBlocks); err != nil || replyBlocks != 2 {
		t.Fatalf("worker_reply = %d blocks, %v; want the text and the tool_use block", replyBlocks, err)
	}
	exec(`SELECT convo.tool_call_progress($1, '4')`, call)
	exec(`SELECT convo.complete_tool_call($1)`, call)
	var keep bool
	if err := w.QueryRow(ctx, `SELECT convo.heartbeat($1, 'w2')`, promptID).Scan(&keep); err != nil || !keep {
		t.Fatalf("heartbeat = %v, %v", keep, err)
	}
	// The rest in one batch.
	var refused int
	if err := w.QueryRow(ctx, `SELECT count(*) FROM convo.write_batch('w2', 1, jsonb_build_array(
			jsonb_build_object('op', 'start_block', 'prompt', $1::text, 'block', '0f0e7a44-5a55-4d7e-9a8f-3c1b2d4e5f60', 'type', 'text'),
			jsonb_build_object('op', 'append', 'prompt', $1::text, 'block', '0f0e7a44-5a55-4d7e-9a8f-3c1b2d4e5f60', 'text', '4.', 'seq', 1),
			jsonb_build_object('op', 'complete_prompt', 'prompt', $1::text)))`, promptID).Scan(&refused); err != nil || refused != 0 {
		t.Fatalf("write_batch: %d refused, %v", refused, err)
	}
	var mark int64
	if err := w.QueryRow(ctx, `SELECT batch FROM convo.worker_batch_mark('w2', 0)`).Scan(&mark); err != nil || mark != 1 {
		t.Fatalf("worker_batch_mark = %d, %v; want 1", mark, err)
	}
	if err := w.QueryRow(ctx, `SELECT convo.prompt_status($1, 'w2')`, promptID).Scan(&status); err != nil || status != "completed" {
		t.Fatalf("prompt_status = %q, %v; want completed", status, err)
	}

	// What the owner reads: the whole reply, its events in order.
	var content string
	if err := owner.QueryRow(ctx, `SELECT string_agg(b.content, '|' ORDER BY b.position) FROM convo.blocks b
		JOIN convo.prompts p ON p.message_id = b.message_id WHERE p.id = $1`, promptID).Scan(&content); err != nil ||
		content != `Let me compute.||4.` {
		t.Errorf("the reply's blocks = %q, %v", content, err)
	}
	var kinds []string
	if err := owner.QueryRow(ctx, `SELECT array_agg(kind ORDER BY seq) FROM convo.events WHERE prompt_id = $1
		AND kind IN ('promptStarted', 'toolCallStarted', 'inputRequested', 'promptWaiting', 'inputAnswered', 'toolCallCompleted', 'promptCompleted')`,
		promptID).Scan(&kinds); err != nil {
		t.Fatal(err)
	}
	want := []string{"promptStarted", "toolCallStarted", "inputRequested", "promptWaiting", "inputAnswered", "promptStarted",
		"toolCallCompleted", "promptCompleted"}
	if !slices.Equal(kinds, want) {
		t.Errorf("events = %v, want %v", kinds, want)
	}
	// The writes notified (convo_events: <conversation>:<seq>).
	n, err := listener.WaitForNotification(ctx)
	if err != nil || n.Channel != "convo_events" {
		t.Errorf("no notification on convo_events: %v %v", n, err)
	}
}

// TestWorkerRoleCannot checks what a connection of the worker role may not
// do: read any table or view of convo, call a client or maintenance
// function (send_message as anyone, answer_input, cancel_prompt …), read
// through the worker API a conversation whose prompt it does not hold, or
// create objects in the schema convo.
func TestWorkerRoleCannot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	owner := connect(t, dsn)
	w := connect(t, pgtest.WorkerDSN(t, dsn))
	_, bobsPrompt := send(t, owner, "bob", "bob's secret")
	_, alicesPrompt := send(t, owner, "alice", "alice's question")

	denied := func(what, sql string, args ...any) {
		t.Helper()
		_, err := w.Exec(ctx, sql, args...)
		if sqlState(err) != "42501" { // insufficient_privilege
			t.Errorf("%s: %v, want permission denied (42501)", what, err)
		}
	}

	// No table or view.
	rows, err := owner.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'convo' AND c.relkind IN ('r', 'v', 'm', 'p')`)
	if err != nil {
		t.Fatal(err)
	}
	relations, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(relations) < 10 {
		t.Fatalf("relations of convo: %v, %v", relations, err)
	}
	for _, rel := range relations {
		denied("SELECT from "+rel, "SELECT 1 FROM "+rel+" LIMIT 1")
	}
	denied("UPDATE convo.prompts", "UPDATE convo.prompts SET worker = 'w1'")

	// No function outside the worker API: every one of them, with NULL
	// arguments (the privilege is checked before any argument).
	rows, err = owner.Query(ctx, `SELECT p.proname, p.oid::regprocedure::text, p.pronargs FROM pg_proc p
		WHERE p.pronamespace = 'convo'::regnamespace AND p.prokind = 'f'`)
	if err != nil {
		t.Fatal(err)
	}
	type fn struct {
		Name, Signature string
		Args            int16
	}
	fns, err := pgx.CollectRows(rows, pgx.RowToStructByPos[fn])
	if err != nil {
		t.Fatal(err)
	}
	var callable []string
	for _, f := range fns {
		var executable bool
		if err := owner.QueryRow(ctx, `SELECT has_function_privilege($1, $2::regprocedure, 'EXECUTE')`,
			db.WorkerRole, f.Signature).Scan(&executable); err != nil {
			t.Fatal(err)
		}
		if executable {
			callable = append(callable, f.Name)
		}
		if slices.Contains(workerAPI, f.Name) {
			continue
		}
		nulls := make([]any, f.Args)
		placeholders := ""
		for i := range nulls {
			if i > 0 {
				placeholders += ", "
			}
			placeholders += fmt.Sprintf("$%d", i+1)
		}
		// Trigger functions cannot be called at all, and a STRICT function
		// of NULLs is folded to NULL without a call; the rest are refused.
		if _, err := w.Exec(ctx, "SELECT convo."+f.Name+"("+placeholders+")", nulls...); sqlState(err) != "42501" {
			var trigger, strict bool
			if err := owner.QueryRow(ctx, `SELECT prorettype = 'trigger'::regtype, proisstrict FROM pg_proc WHERE oid = $1::regprocedure`,
				f.Signature).Scan(&trigger, &strict); err != nil {
				t.Fatal(err)
			}
			if !(trigger && err != nil) && !(strict && err == nil) {
				t.Errorf("calling %s as the worker role: %v, want permission denied (42501)", f.Signature, err)
			}
		}
	}
	slices.Sort(callable)
	if !slices.Equal(callable, workerAPI) {
		t.Errorf("the worker role may call %v, want exactly %v", callable, workerAPI)
	}
	// The client functions, called as they would be.
	denied("send_message as bob", `SELECT * FROM convo.send_message('bob', NULL, 'hi', '[{"provider": "demo"}]')`)
	denied("create_conversation as bob", `SELECT convo.create_conversation('bob', 'mine')`)
	denied("cancel_prompt", `SELECT convo.cancel_prompt($1)`, bobsPrompt)
	denied("answer_input", `SELECT convo.answer_input('bob', gen_random_uuid(), '{"approved": true}')`)
	denied("compact_events", `SELECT * FROM convo.compact_events(interval '0')`)
	denied("set_event_notify", `SELECT convo.set_event_notify(false)`)

	// Nothing to create in convo.
	denied("CREATE FUNCTION in convo", `CREATE FUNCTION convo.steal() RETURNS int LANGUAGE sql AS 'SELECT 1'`)
	denied("CREATE TABLE in convo", `CREATE TABLE convo.loot (x int)`)
	denied("CREATE VIEW in convo", `CREATE VIEW convo.loot AS SELECT 1`)

	// The worker API reads only what the worker holds: w1 claims one
	// prompt (the oldest: bob's); alice's, queued, and bob's, under another
	// worker's name, are not readable.
	var claimed string
	if err := w.QueryRow(ctx, `SELECT prompt_id::text FROM convo.claim_prompts('w1', 30, 1)`).Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	if claimed != bobsPrompt {
		t.Fatalf("claimed %s, want bob's %s", claimed, bobsPrompt)
	}
	for _, read := range []string{
		`SELECT * FROM convo.worker_context($1, $2)`,
		`SELECT * FROM convo.worker_reply($1, $2)`,
		`SELECT * FROM convo.prompt_inputs($1, $2)`,
	} {
		for _, c := range []struct{ prompt, worker string }{{alicesPrompt, "w1"}, {bobsPrompt, "w2"}, {alicesPrompt, ""}} {
			_, err := w.Exec(ctx, read, c.prompt, c.worker)
			if sqlState(err) != "CV001" {
				t.Errorf("%s of prompt %s as worker %q: %v, want CV001 (not held)", read, c.prompt, c.worker, err)
			}
		}
	}
	var status *string
	if err := w.QueryRow(ctx, `SELECT convo.prompt_status($1, 'w1')`, alicesPrompt).Scan(&status); err != nil || status != nil {
		t.Errorf("prompt_status of a prompt w1 never held = %v, %v; want NULL", status, err)
	}
	var n int
	if err := w.QueryRow(ctx, `SELECT count(*) FROM convo.worker_context($1, 'w1')`, bobsPrompt).Scan(&n); err != nil || n != 1 {
		t.Errorf("worker_context of the prompt w1 holds = %d rows, %v; want bob's message", n, err)
	}
}

// TestWorkerFunctionsAreDefiners checks the attributes privileges.sql sets
// after every Migrate: each function of the worker API runs as its owner
// with a fixed search_path, and no function of convo is executable by
// PUBLIC.
func TestWorkerFunctionsAreDefiners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	// Again, as every server start does: CREATE OR REPLACE resets them,
	// privileges.sql sets them again.
	if err := db.Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, dsn)
	rows, err := conn.Query(ctx, `SELECT p.proname, p.prosecdef, coalesce(array_to_string(p.proconfig, ','), ''),
			EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
			         WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
		  FROM pg_proc p WHERE p.pronamespace = 'convo'::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, config string
		var definer, public bool
		if err := rows.Scan(&name, &definer, &config, &public); err != nil {
			t.Fatal(err)
		}
		if public {
			t.Errorf("PUBLIC may execute convo.%s", name)
		}
		worker := slices.Contains(workerAPI, name)
		if worker && (!definer || config != "search_path=pg_catalog, convo, pg_temp") {
			t.Errorf("convo.%s: SECURITY DEFINER %v, SET %q; want a definer with search_path=pg_catalog, convo, pg_temp", name, definer, config)
		}
		if !worker && definer {
			t.Errorf("convo.%s is SECURITY DEFINER but not of the worker API", name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateWhenTheWorkerRoleExists migrates an empty database of a
// cluster whose worker role exists already (roles belong to the cluster:
// another database made it), and checks that the new database grants it
// the worker API all the same.
func TestMigrateWhenTheWorkerRoleExists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := connect(t, pgtest.DSN(t))
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT to_regrole($1) IS NOT NULL`, db.WorkerRole).Scan(&exists); err != nil || !exists {
		t.Fatalf("the worker role exists after the template's migration: %v, %v", exists, err)
	}
	dsn := emptyDatabase(t, admin)
	if err := db.Migrate(ctx, dsn); err != nil {
		t.Fatalf("Migrate with the worker role there already: %v", err)
	}
	w := connect(t, pgtest.WorkerDSN(t, dsn))
	if _, err := w.Exec(ctx, `SELECT convo.expire_leases()`); err != nil {
		t.Errorf("the worker role, on the new database: %v", err)
	}
}

// emptyDatabase creates an empty database on the server of admin, dropped
// when the test ends, and returns its connection string.
func emptyDatabase(t *testing.T, admin *pgx.Conn) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("convo_empty_%x", rand.Uint64())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") }) //nolint:errcheck
	u, err := url.Parse(admin.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// TestWorkerRoleCreatedOnceByConcurrentMigrations starts a cluster of its
// own, with no worker role yet, and migrates four databases of it at once:
// each migration creates the role when it is missing, and the ones that
// lose the race must go on, not fail.
func TestWorkerRoleCreatedOnceByConcurrentMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Not t.TempDir: as root, PostgreSQL runs as the postgres user, which
	// must reach the directory.
	dir, err := os.MkdirTemp("", "convo-db-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cluster, err := pgembed.Start(ctx, pgembed.Options{DataDir: filepath.Join(dir, "data"), Port: 0, Fast: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("start a cluster: %v", err)
	}
	t.Cleanup(func() { cluster.Stop(context.Background()) }) //nolint:errcheck
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		name := fmt.Sprintf("convo%d", i)
		if err := cluster.CreateDatabase(ctx, name); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { errs <- db.Migrate(ctx, cluster.DSN(name)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Migrate, four databases of a new cluster at once: %v", err)
		}
	}
	conn := connect(t, cluster.DSN("convo3"))
	var roles int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname = $1 AND NOT rolcanlogin`, db.WorkerRole).Scan(&roles); err != nil || roles != 1 {
		t.Errorf("%d NOLOGIN roles %s, %v; want 1", roles, db.WorkerRole, err)
	}
}
