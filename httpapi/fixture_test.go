package httpapi_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testwait"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/postgres/dbq"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
	"github.com/convo-dev/convo/worker"
	"github.com/convo-dev/convo/worker/builtin"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	testSecret = "test-secret-of-at-least-32-bytes!!"
	// waitTimeout bounds every wait for something asynchronous.
	waitTimeout = 20 * time.Second
)

type testBundle struct {
	pool  *pgxpool.Pool
	store *postgres.Store
	q     *dbq.Queries
	url   string
	// stopHub ends every open stream, as a server shutting down does.
	stopHub func()
}

type setupOptions struct {
	verifier  auth.Verifier
	workers   bool          // run in-process workers with the demo model at full speed
	demoPace  float64       // with workers: the demo model's tokens per second instead
	keepAlive time.Duration // default: longer than any test
}

func setup(t testing.TB, opts ...setupOptions) *testBundle {
	t.Helper()
	var o setupOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	pool := pgtest.Pool(t)
	store := postgres.New(pool)
	hub := wire.NewHub(stream.HubOptions[*wire.Response]{Store: store})
	feed := &stream.NotifyFeed{ConnConfig: pool.Config().ConnConfig.Copy(), Hub: hub}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { hub.Run(ctx) })
	wg.Go(func() { feed.Run(ctx) })
	if o.keepAlive == 0 {
		o.keepAlive = time.Minute
	}
	srv := httptest.NewServer(httpapi.NewHandler(httpapi.Options{
		Store: store, Hub: hub, Auth: auth.Authenticator{Verifier: o.verifier}, KeepAlive: o.keepAlive,
	}))
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { cancel(); wg.Wait() }) }
	// Streams end first (the hub closes them), then the server.
	t.Cleanup(func() {
		stop()
		srv.Close()
	})
	// Events missed before LISTEN are read again once it connects, but a
	// deletion's notification is not: tests that delete need the feed up.
	testwait.For(t, "the listener to connect", func() bool { return feed.Connects() > 0 })
	if o.workers {
		ws := worker.DefaultSettings()
		ws.DemoTokensPerSecond = -1
		if o.demoPace > 0 {
			ws.DemoTokensPerSecond = o.demoPace
		}
		ws.PollInterval = 200 * time.Millisecond
		cfg, err := builtin.Config(ws, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		p, err := worker.Start(context.Background(), pool, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				t.Errorf("stop workers: %v", err)
			}
		})
	}
	return &testBundle{pool: pool, store: store, q: store.Queries(), url: srv.URL, stopHub: stop}
}

func setupAuth(t testing.TB) *testBundle {
	return setup(t, setupOptions{verifier: auth.NewHS256(testSecret)})
}

// tokenFor signs an HS256 token for user, valid one hour.
func tokenFor(t testing.TB, user string) string {
	t.Helper()
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(map[string]any{"alg": "HS256", "typ": "JWT"}) + "." +
		enc(map[string]any{"sub": user, "exp": time.Now().Add(time.Hour).Unix()})
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// sent is a queued prompt.
type sent struct {
	conversationID, userMessageID, messageID, promptID uuid.UUID
}

// send sends text as owner (a new conversation when conversationID is
// uuid.Nil).
func (tb *testBundle) send(t testing.TB, owner string, conversationID uuid.UUID, text string) sent {
	t.Helper()
	res, err := tb.store.SendMessage(context.Background(), conversation.SendMessageParams{
		OwnerID: owner, ConversationID: conversationID, Text: text, ModelConfigs: []json.RawMessage{json.RawMessage("{}")},
	})
	if err != nil {
		t.Fatalf("send message: %v", err)
	}
	return sent{conversationID: res.ConversationID, userMessageID: res.UserMessageID,
		messageID: res.AssistantMessageIDs[0], promptID: res.PromptIDs[0]}
}

// The worker's side, through the SQL worker API (the test picks which
// prompt runs, without claiming it).

func (tb *testBundle) startPrompt(t testing.TB, prompt uuid.UUID) {
	t.Helper()
	if err := tb.q.PromptStart(context.Background(), prompt); err != nil {
		t.Fatal(err)
	}
}

func (tb *testBundle) startBlock(t testing.TB, prompt uuid.UUID, blockType, metadata string) uuid.UUID {
	t.Helper()
	id, err := tb.q.BlockStart(context.Background(), dbq.BlockStartParams{PromptID: prompt, BlockType: blockType, Metadata: []byte(metadata)})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (tb *testBundle) appendText(t testing.TB, block uuid.UUID, deltas ...string) {
	t.Helper()
	for _, d := range deltas {
		if err := tb.q.BlockAppend(context.Background(), dbq.BlockAppendParams{BlockID: block, Delta: d}); err != nil {
			t.Fatal(err)
		}
	}
}

func (tb *testBundle) endBlock(t testing.TB, block uuid.UUID) {
	t.Helper()
	if _, err := tb.pool.Exec(context.Background(), "SELECT convo.end_block($1)", block); err != nil {
		t.Fatal(err)
	}
}

// toolCall records a tool call on a tool_use block, with its output in
// progress chunks, and completes it (or fails it, when errText is set).
func (tb *testBundle) toolCall(t testing.TB, block uuid.UUID, name, input, errText string, progress ...string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var id uuid.UUID
	if err := tb.pool.QueryRow(ctx, "SELECT convo.start_tool_call($1, $2, $3)", block, name, input).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, p := range progress {
		if _, err := tb.pool.Exec(ctx, "SELECT convo.tool_call_progress($1, $2)", id, p); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if errText != "" {
		_, err = tb.pool.Exec(ctx, "SELECT convo.fail_tool_call($1, $2)", id, errText)
	} else {
		_, err = tb.pool.Exec(ctx, "SELECT convo.complete_tool_call($1)", id)
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (tb *testBundle) completePrompt(t testing.TB, prompt uuid.UUID) {
	t.Helper()
	if err := tb.q.PromptComplete(context.Background(), prompt); err != nil {
		t.Fatal(err)
	}
}

func (tb *testBundle) failPrompt(t testing.TB, prompt uuid.UUID, errText string) {
	t.Helper()
	if _, err := tb.pool.Exec(context.Background(), "SELECT convo.fail_prompt($1, $2)", prompt, errText); err != nil {
		t.Fatal(err)
	}
}

// rename appends one event that changes no message: a marker a stream
// reader can wait for.
func (tb *testBundle) rename(t testing.TB, owner string, conversationID uuid.UUID, title string) {
	t.Helper()
	if _, err := tb.store.RenameConversation(context.Background(), owner, conversationID, title); err != nil {
		t.Fatal(err)
	}
}

func (tb *testBundle) state(t testing.TB, owner string, conversationID uuid.UUID) conversation.State {
	t.Helper()
	st, err := tb.store.State(context.Background(), owner, conversationID)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// sseEvent is one Server-Sent Event as a client parses it.
type sseEvent struct {
	id, name, data string
	hasID          bool
}

// sseClient reads an event stream over a real HTTP connection.
type sseClient struct {
	resp     *http.Response
	cancel   context.CancelFunc
	events   chan sseEvent
	comments chan string
	retry    chan string
	done     chan struct{} // closed when the body ends
	err      error         // why it ended; read after done
}

// get opens url with header; the caller checks the status.
func get(t testing.TB, method, url string, header http.Header, body io.Reader) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return resp, cancel
}

// openSSE starts reading a stream that must answer 200.
func openSSE(t testing.TB, method, url string, header http.Header, body io.Reader) *sseClient {
	t.Helper()
	resp, cancel := get(t, method, url, header, body)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("%s %s: %s %s", method, url, resp.Status, b)
	}
	c := &sseClient{resp: resp, cancel: cancel, events: make(chan sseEvent, 10_000), comments: make(chan string, 100),
		retry: make(chan string, 1), done: make(chan struct{})}
	go c.read()
	t.Cleanup(c.close)
	return c
}

// read parses the body as the SSE specification says (lines ending in
// "\n", fields "id", "event", "data", "retry", comments starting ":").
func (c *sseClient) read() {
	defer close(c.done)
	sc := bufio.NewScanner(c.resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var ev sseEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data != nil {
				ev.data = strings.Join(data, "\n")
				c.events <- ev
			}
			ev, data = sseEvent{}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			select {
			case c.comments <- value:
			default: // a test that counts comments reads them as they come
			}
		case "id":
			ev.id, ev.hasID = value, true
		case "event":
			ev.name = value
		case "data":
			data = append(data, value)
		case "retry":
			select {
			case c.retry <- value:
			default:
			}
		}
	}
	c.err = sc.Err()
}

// next returns the next event, failing the test when none comes.
func (c *sseClient) next(t testing.TB) sseEvent {
	t.Helper()
	select {
	case ev := <-c.events:
		return ev
	case <-c.done:
		select {
		case ev := <-c.events:
			return ev
		default:
		}
		t.Fatalf("stream ended (%v); want another event", c.err)
	case <-time.After(waitTimeout):
		t.Fatal("no event within the timeout")
	}
	return sseEvent{}
}

// ended waits for the body to end, failing the test when an event comes
// first.
func (c *sseClient) ended(t testing.TB) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(waitTimeout):
		t.Fatal("the stream did not end")
	}
	select {
	case ev := <-c.events:
		t.Fatalf("an event before the end: %+v", ev)
	default:
	}
}

// close drops the connection, as a client that goes away does.
func (c *sseClient) close() {
	c.cancel()
	c.resp.Body.Close()
	<-c.done
}

// errorBody reads a JSON error response.
func errorBody(t testing.TB, resp *http.Response) (code, message string) {
	t.Helper()
	defer resp.Body.Close()
	var body struct{ Code, Message string }
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type = %q", ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("error body: %v", err)
	}
	return body.Code, body.Message
}

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}
