package db_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/postgres/dbq"
)

// The fixture of the SQL API's tests: a database of its own per test, the
// Go store on it (to send and read as a client does, where a test needs
// it) and the queries that call the SQL functions as a worker does.
// postgres/fixture_test.go has the same for the store's tests.
type testBundle struct {
	pool  *pgxpool.Pool
	store *postgres.Store
	q     *dbq.Queries  // the store's queries
	api   *apiq.Queries // the SQL API as a worker (or a client, without the store) calls it
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	return setupDSN(t, pgtest.DSN(t))
}

func setupDSN(t testing.TB, dsn string) *testBundle {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := postgres.New(pool)
	return &testBundle{pool: pool, store: store, q: store.Queries(), api: apiq.New(pool)}
}

// reply is a prompt that a worker has claimed and started.
type reply struct {
	conversationID uuid.UUID
	messageID      uuid.UUID
	promptID       uuid.UUID
}

// sendMessage sends text as the user "local" and returns the queued prompt.
func (tb *testBundle) sendMessage(t testing.TB, conversationID uuid.UUID, text string) reply {
	t.Helper()
	res, err := tb.store.SendMessage(context.Background(), conversation.SendMessageParams{
		OwnerID: "local", ConversationID: conversationID, Text: text,
		ModelConfigs: []json.RawMessage{json.RawMessage(`{"model":"demo"}`)},
	})
	if err != nil {
		t.Fatalf("send message: %v", err)
	}
	return reply{conversationID: res.ConversationID, messageID: res.AssistantMessageIDs[0], promptID: res.PromptIDs[0]}
}

// startReply sends a message and claims and starts its prompt as worker w1.
func (tb *testBundle) startReply(t testing.TB) reply {
	t.Helper()
	ctx := context.Background()
	r := tb.sendMessage(t, uuid.Nil, "hello")
	claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
	if err != nil || len(claimed) != 1 || claimed[0].PromptID != r.promptID {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	if err := tb.api.PromptStart(ctx, r.promptID); err != nil {
		t.Fatalf("start prompt: %v", err)
	}
	return r
}

func (tb *testBundle) startBlock(t testing.TB, promptID uuid.UUID, blockType string) uuid.UUID {
	t.Helper()
	id, err := tb.api.BlockStart(context.Background(), apiq.BlockStartParams{
		PromptID: promptID, BlockType: blockType, Metadata: json.RawMessage(`{}`),
	})
	if err != nil {
		t.Fatalf("start %s block: %v", blockType, err)
	}
	return id
}

func (tb *testBundle) append(t testing.TB, blockID uuid.UUID, delta string) {
	t.Helper()
	if err := tb.api.BlockAppend(context.Background(), apiq.BlockAppendParams{BlockID: blockID, Delta: delta}); err != nil {
		t.Fatalf("append block: %v", err)
	}
}

func (tb *testBundle) state(t testing.TB, conversationID uuid.UUID) conversation.State {
	t.Helper()
	st, err := tb.store.State(context.Background(), "local", conversationID)
	if err != nil {
		t.Fatalf("state: %v", err)
	}
	return st
}

func (tb *testBundle) events(t testing.TB, conversationID uuid.UUID) []conversation.Event {
	t.Helper()
	events, err := tb.store.EventsAfter(context.Background(), conversationID, 0, 1_000_000)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	return events
}

// fingerprint summarises every row a worker call can touch, so a test can
// assert that an illegal call changed nothing.
func (tb *testBundle) fingerprint(t testing.TB) string {
	t.Helper()
	var fp string
	err := tb.pool.QueryRow(context.Background(), `
		SELECT concat_ws('|',
			(SELECT count(*) FROM convo.events),
			(SELECT string_agg(id::text || last_seq || coalesce(active_prompt_id::text, '') || title, ',' ORDER BY id) FROM convo.conversations),
			(SELECT string_agg(id::text || status || queued, ',' ORDER BY id) FROM convo.messages),
			(SELECT string_agg(id::text || status || waiting || awaiting_turn || attempts || coalesce(worker, '') || coalesce(error, ''), ',' ORDER BY id) FROM convo.prompts),
			(SELECT string_agg(id::text || status || content || metadata::text || delta_count, ',' ORDER BY id) FROM convo.blocks),
			(SELECT string_agg(id::text || status || output || coalesce(error, ''), ',' ORDER BY id) FROM convo.tool_calls),
			(SELECT string_agg(tool_call_id::text || status || coalesce(answer::text, '') || coalesce(claimed_by, '') || coalesce(claim_expires_at::text, ''), ',' ORDER BY tool_call_id) FROM convo.input_requests),
			(SELECT string_agg(owner_id || coalesce(waiting_since::text, ''), ',' ORDER BY owner_id) FROM convo.owner_queue))`).Scan(&fp)
	if err != nil {
		t.Fatalf("fingerprint: %v", err)
	}
	return fp
}

// requireSQLState asserts that err is a PostgreSQL error with code.
func requireSQLState(t testing.TB, err error, code string) *pgconn.PgError {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("want SQLSTATE %s, got %v", code, err)
	}
	if pgErr.Code != code {
		t.Fatalf("want SQLSTATE %s, got %s: %s", code, pgErr.Code, pgErr.Message)
	}
	return pgErr
}

func kinds(events []conversation.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = string(e.Kind)
	}
	return out
}

// migrations is goose's provider of db/schema on the database at dsn, for
// tests that migrate down and up again.
func migrations(t testing.TB, dsn string) *goose.Provider {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { sqlDB.Close() })
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, os.DirFS("../db/schema"))
	if err != nil {
		t.Fatal(err)
	}
	return provider
}

func appendParams(blockID uuid.UUID, delta string) apiq.BlockAppendParams {
	return apiq.BlockAppendParams{BlockID: blockID, Delta: delta}
}

func deltaContent(t testing.TB, e conversation.Event) string {
	t.Helper()
	var d struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(e.Payload, &d); err != nil {
		t.Fatalf("blockDelta payload %s: %v", e.Payload, err)
	}
	return d.Content
}

// fileService returns a files.Service on a new database, with the
// PostgreSQL stores, and the test bundle of that database.
func fileService(t testing.TB, limits files.Limits) (*files.Service, *testBundle) {
	t.Helper()
	tb := setup(t)
	svc := files.NewService(files.Options{
		Store: postgres.NewFileStore(tb.pool), Blobs: postgres.NewFileBlobs(tb.pool), Limits: limits,
	})
	return svc, tb
}

// randomBytes returns n bytes that sniff as application/octet-stream.
func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	// A leading zero byte: never text, never a known signature.
	b[0] = 0
	return b
}

// send sends text as owner, starting a conversation when conversationID is
// uuid.Nil, with one model configuration per prompt to queue.
func (tb *testBundle) send(ctx context.Context, owner string, conversationID uuid.UUID, prompts int) (conversation.SendMessageResult, error) {
	configs := make([]json.RawMessage, prompts)
	for i := range configs {
		configs[i] = json.RawMessage(`{"model":"demo"}`)
	}
	return tb.store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: owner, ConversationID: conversationID, Text: "hello", ModelConfigs: configs,
	})
}

// setCap sets the cap on each owner's prompts in flight (0: none).
func (tb *testBundle) setCap(t *testing.T, n int) {
	t.Helper()
	if err := tb.store.SetMaxActivePrompts(context.Background(), n); err != nil {
		t.Fatalf("set max active prompts %d: %v", n, err)
	}
}

// requireQuotaExceeded asserts err is the quota error naming its limit.
func requireQuotaExceeded(t *testing.T, err error) {
	t.Helper()
	if conversation.ErrorCode(err) != conversation.ResourceExhausted {
		t.Fatalf("err = %v (code %q); want resource_exhausted", err, conversation.ErrorCode(err))
	}
	if msg := conversation.ErrorMessage(err); !strings.Contains(msg, "max_active_prompts") {
		t.Errorf("message %q does not name the limit", msg)
	}
}

// count returns the answer of a count(*) query.
func (tb *testBundle) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := tb.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// answerWith has worker w1 claim the queued prompt, write text as one
// text block and complete it.
func (tb *testBundle) answerWith(t testing.TB, promptID uuid.UUID, text string) {
	t.Helper()
	claimed, err := tb.api.PromptClaim(context.Background(), apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
	if err != nil || len(claimed) != 1 || claimed[0].PromptID != promptID {
		t.Fatalf("claim: %v %+v; want prompt %s", err, claimed, promptID)
	}
	tb.complete(t, promptID, text)
}

// complete starts the claimed prompt, writes text as one text block and
// completes it.
func (tb *testBundle) complete(t testing.TB, promptID uuid.UUID, text string) {
	t.Helper()
	ctx := context.Background()
	if err := tb.api.PromptStart(ctx, promptID); err != nil {
		t.Fatal(err)
	}
	block := tb.startBlock(t, promptID, "text")
	tb.append(t, block, text)
	if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: block}); err != nil {
		t.Fatal(err)
	}
	if err := tb.api.PromptComplete(ctx, promptID); err != nil {
		t.Fatal(err)
	}
}
