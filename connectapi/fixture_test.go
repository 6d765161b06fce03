package connectapi_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/connectapi"
	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/files"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/limit"
	"github.com/convo-dev/convo/pglisten"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/postgres/dbq"
	"github.com/convo-dev/convo/presence"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const testSecret = "test-secret-of-at-least-32-bytes!!"

type testBundle struct {
	// pool is the servers' pool: behind PgBouncer with pgtest.Pooler;
	// dsn is the database's direct URL, for what needs a session.
	pool  *pgxpool.Pool
	dsn   string
	store *postgres.Store
	hub   *wire.Hub
	// parking is nil with setupOptions.noParking.
	parking *connectapi.Parking
	feed    stream.Feed
	q       *dbq.Queries
	api     *apiq.Queries // the SQL API as a worker calls it
	url     string
	client  convov1connect.ConversationServiceClient
	// stop stops the hub and its feed (the test's cleanup does too).
	stop func()
	// files and signer are set with setupOptions.files.
	files  *files.Service
	signer *files.Signer
	// presence is set with setupOptions.presence.
	presence *presence.Tracker
}

type setupOptions struct {
	// dsn, when set, is the database to serve (another bundle's: a
	// second server); otherwise a new one.
	dsn       string
	verifier  auth.Verifier
	queueSize int
	// feed is feedNotify (the default) or feedLogical.
	feed string
	// noParking keeps every stream on its handler (Options.Parking nil).
	noParking bool
	// decode is the hub's Decode (default wire.DecodeSigned).
	decode func(conversation.Event) (*wire.Response, error)
	// searchTimeout, when set, is the store's search timeout.
	searchTimeout time.Duration
	// searches is Options.Searches (nil: no bound).
	searches *limit.Searches
	// snapshotBytes bounds snapshots, ListMessages pages and the messages
	// of a branchSwitched (default stream.DefaultSnapshotBytes).
	snapshotBytes int
	// demoModel is Options.DemoModel.
	demoModel bool
	// files keeps files in PostgreSQL (testBundle.files) and signs their
	// URLs (Options.FileURLs and the hub's Decode).
	files bool
	// presence, when set, tracks presence (testBundle.presence) with
	// these options, Send and Publish filled in, its records heard on one
	// listener that the notify feed shares, as cmd/api has it.
	presence *presence.Options
}

// The feeds the stream tests run under.
const (
	feedNotify  = "Notify"
	feedLogical = "Logical"
)

var feeds = []string{feedNotify, feedLogical}

// forEachFeed runs test once per feed, as parallel subtests named by feed.
func forEachFeed(t *testing.T, test func(t *testing.T, feed string)) {
	for _, feed := range feeds {
		t.Run(feed, func(t *testing.T) {
			t.Parallel()
			test(t, feed)
		})
	}
}

func setup(t testing.TB, opts ...setupOptions) *testBundle {
	t.Helper()
	var o setupOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	dsn := o.dsn
	if dsn == "" {
		dsn = pgtest.DSN(t)
	}
	pooled := pgtest.Pooler(t)
	pool := pgtest.ClientPool(t, dsn, func(c *pgxpool.Config) {
		// Behind a transaction pooler the bound is set in each path
		// change's transaction instead (Store.SetSnapshotBytes).
		if o.snapshotBytes > 0 && !pooled {
			postgres.SetSnapshotBytes(c, o.snapshotBytes)
		}
	})
	store := postgres.New(pool)
	if o.snapshotBytes > 0 && pooled {
		store.SetSnapshotBytes(o.snapshotBytes)
	}
	if o.searchTimeout != 0 {
		store.SetSearchTimeout(o.searchTimeout)
	}
	var fileSvc *files.Service
	var signer *files.Signer
	var urls wire.FileURLs // nil, not a nil *files.Signer, without files
	if o.files {
		var err error
		if signer, err = files.NewSigner([]byte("connectapi tests sign file URLs with this key"), 0); err != nil {
			t.Fatal(err)
		}
		urls = signer
		fileSvc = files.NewService(files.Options{Store: postgres.NewFileStore(pool), Blobs: postgres.NewFileBlobs(pool),
			Storage: files.StoragePostgres})
	}
	if o.decode == nil {
		o.decode = wire.DecodeSigned(urls)
	}
	hub := stream.NewHub(stream.HubOptions[*wire.Response]{Store: store, Decode: o.decode, QueueSize: o.queueSize,
		SnapshotBytes: o.snapshotBytes})
	feed := newFeed(t, o.feed, dsn, pool, store, hub)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var tracker *presence.Tracker
	var listener *pglisten.Listener
	if o.presence != nil {
		popts := *o.presence
		popts.Send, popts.Publish = store.NotifyPresence, wire.PublishPresence(hub)
		tracker = presence.New(popts)
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		listener = pglisten.New(pglisten.Options{ConnConfig: cfg})
		tracker.Listen(listener)
		if nf, ok := feed.(*stream.NotifyFeed); ok {
			nf.Listener = listener
		}
		wg.Go(func() { listener.Run(ctx) })
		wg.Go(func() { tracker.Run(ctx) })
	}
	wg.Go(func() { hub.Run(ctx) })
	wg.Go(func() { feed.Run(ctx) })

	var parking *connectapi.Parking
	if !o.noParking {
		parking = connectapi.NewParking(nil)
	}
	path, handler := connectapi.NewHandler(connectapi.Options{
		Store: store, Hub: hub, Auth: auth.Authenticator{Verifier: o.verifier}, Parking: parking,
		Searches: o.searches, PageBytes: o.snapshotBytes, DemoModel: o.demoModel, FileURLs: urls,
		Presence: tracker,
	})
	mux := http.NewServeMux()
	mux.Handle(path, handler)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	// Streams end first (the hub closes them, and parked ones write
	// their end), then the server.
	stop := func() {
		cancel()
		wg.Wait()
		if parking != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := parking.Wait(ctx); err != nil {
				t.Errorf("parked streams did not end: %v", err)
			}
		}
	}
	t.Cleanup(func() {
		stop()
		srv.Close()
	})
	// Notifications sent before the feed's first connection are not heard
	// (a later connect catches up on events, but a deletion is only a
	// notification): tests start once it listens.
	for deadline := time.Now().Add(30 * time.Second); feed.Connects() == 0 || (listener != nil && listener.Connects() == 0); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the feed did not connect within 30 s")
		}
	}
	return &testBundle{
		dsn:  dsn,
		pool: pool, store: store, hub: hub, feed: feed, parking: parking, q: store.Queries(), api: apiq.New(pool), url: srv.URL, stop: stop,
		client: convov1connect.NewConversationServiceClient(srv.Client(), srv.URL),
		files:  fileSvc, signer: signer, presence: tracker,
	}
}

// newFeed returns the feed of hub. With the logical feed, the database's
// events stop notifying, as a server with CONVO_FEED=logical has it.
// Its connection is to dsn, directly: a feed holds a session.
func newFeed(t testing.TB, name, dsn string, pool *pgxpool.Pool, store *postgres.Store, hub stream.Sink) stream.Feed {
	t.Helper()
	config, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	switch name {
	case "", feedNotify:
		config.RuntimeParams["application_name"] = "convo-listener"
		return &stream.NotifyFeed{ConnConfig: config, Hub: hub}
	case feedLogical:
		if _, err := store.SetEventNotify(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		// Logical decoding reads only flushed WAL: with the test server's
		// synchronous_commit=off an event would wait for the WAL writer
		// (up to 200 ms). Commit as deployments do (fsync stays off).
		if _, err := pool.Exec(context.Background(), `DO $$ BEGIN
			EXECUTE format('ALTER DATABASE %I SET synchronous_commit = on', current_database()); END $$`); err != nil {
			t.Fatal(err)
		}
		pool.Reset()
		config.RuntimeParams["application_name"] = "convo-logical-" + uuid.NewString()[:8]
		return &stream.LogicalFeed{ConnConfig: config, Hub: hub, StatusInterval: 100 * time.Millisecond}
	}
	t.Fatalf("unknown feed %q", name)
	return nil
}

// workerListener is the listener for a worker.Pool on tb.pool: nil (the
// pool's own) unless tb.pool goes through PgBouncer, where it is one on
// the direct URL, as cmd/worker's with CONVO_DIRECT_DATABASE_URL, stopped
// when the test ends (after the workers, which the test stops first).
func (tb *testBundle) workerListener(t testing.TB) *pglisten.Listener {
	t.Helper()
	if !pgtest.Pooler(t) {
		return nil
	}
	cfg, err := pgx.ParseConfig(tb.dsn)
	if err != nil {
		t.Fatal(err)
	}
	l := pglisten.New(pglisten.Options{ConnConfig: cfg, PingInterval: 30 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

// h2cClient is a client whose streams share one HTTP/2 connection.
func (tb *testBundle) h2cClient(opts ...connect.ClientOption) convov1connect.ConversationServiceClient {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return convov1connect.NewConversationServiceClient(&http.Client{Transport: &http.Transport{Protocols: p}}, tb.url, opts...)
}

// setupAuth serves with HS256 tokens required.
func setupAuth(t testing.TB) *testBundle {
	return setup(t, setupOptions{verifier: auth.NewHS256(testSecret)})
}

// clientAs returns a client that sends token as its bearer token.
func (tb *testBundle) clientAs(token string) convov1connect.ConversationServiceClient {
	return convov1connect.NewConversationServiceClient(http.DefaultClient, tb.url,
		connect.WithInterceptors(bearer(token)))
}

type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+string(b))
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		return conn
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// hs256 signs claims with secret the way a real issuer would.
func hs256(t testing.TB, secret string, header, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func tokenFor(t testing.TB, user string) string {
	return hs256(t, testSecret, map[string]any{"alg": "HS256", "typ": "JWT"},
		map[string]any{"sub": user, "exp": time.Now().Add(time.Hour).Unix()})
}

func requireCode(t testing.TB, err error, code connect.Code) *connect.Error {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("want %v, got %v", code, err)
	}
	if ce.Code() != code {
		t.Fatalf("want %v, got %v: %s", code, ce.Code(), ce.Message())
	}
	return ce
}

func (tb *testBundle) send(t testing.TB, client convov1connect.ConversationServiceClient, conversationID, text string) *convov1.SendMessageResponse {
	t.Helper()
	res, err := client.SendMessage(context.Background(), connect.NewRequest(&convov1.SendMessageRequest{
		ConversationId: conversationID, Text: text,
	}))
	if err != nil {
		t.Fatalf("send message: %v", err)
	}
	return res.Msg
}

// writeReply plays a worker: starts the prompt (without claiming it, so
// the test picks which one), writes a text block with text, and completes
// it.
func (tb *testBundle) writeReply(t testing.TB, promptID, text string) {
	t.Helper()
	ctx := context.Background()
	id := uuid.MustParse(promptID)
	if err := tb.api.PromptStart(ctx, id); err != nil {
		t.Fatal(err)
	}
	block, err := tb.api.BlockStart(ctx, apiq.BlockStartParams{PromptID: id, BlockType: "text", Metadata: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: block, Delta: text}); err != nil {
		t.Fatal(err)
	}
	if err := tb.api.PromptComplete(ctx, id); err != nil {
		t.Fatal(err)
	}
}

func (tb *testBundle) countRows(t testing.TB) string {
	t.Helper()
	var s string
	err := tb.pool.QueryRow(context.Background(), `SELECT concat_ws(',',
		(SELECT count(*) FROM convo.conversations), (SELECT count(*) FROM convo.messages),
		(SELECT count(*) FROM convo.events), (SELECT string_agg(title || status_sum, ';' ORDER BY id) FROM (
			SELECT c.id, c.title, (SELECT string_agg(p.status, '' ORDER BY p.id) FROM convo.prompts p WHERE p.conversation_id = c.id) AS status_sum
			  FROM convo.conversations c) x),
		(SELECT count(*) FROM convo.comparisons WHERE preference IS NOT NULL),
		(SELECT count(*) FROM convo.messages WHERE feedback_rating IS NOT NULL),
		(SELECT string_agg(r.status || coalesce(r.claimed_by, ''), ';' ORDER BY r.tool_call_id) FROM convo.input_requests r))`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
