// Package apitest is the fixture of the httpapi tests: a server of every
// protocol on its own database and hub (Setup), the worker's side of a
// reply written through the SQL worker API (Bundle's methods), tokens, and
// a client that reads Server-Sent Events as a browser does (OpenSSE).
package apitest

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/connectapi"
	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/files"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/guard"
	"github.com/convo-dev/convo/httpapi"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/internal/testwait"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/postgres/dbq"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
	"github.com/convo-dev/convo/worker"
	"github.com/convo-dev/convo/worker/builtin"
)

const (
	// testSecret signs the tokens of TokenFor, which SetupAuth's server
	// accepts.
	testSecret = "test-secret-of-at-least-32-bytes!!"
	// WaitTimeout bounds every wait for something asynchronous.
	WaitTimeout = 20 * time.Second
)

// Bundle is one test's server and what it runs on.
type Bundle struct {
	Pool  *pgxpool.Pool
	Store *postgres.Store
	Q     *dbq.Queries  // the queries of Store, on Pool
	API   *apiq.Queries // the SQL API as a worker calls it, on Pool
	// URL is the server's; its handler is httpapi.NewHandler's.
	URL string
	// StopHub ends every open stream, as a server shutting down does.
	StopHub func()
	// Files and FileURLs serve the file routes, with Options.Files.
	Files    *files.Service
	FileURLs *files.Signer
}

// FileURLKey is the key of the Bundle's FileURLs.
var FileURLKey = []byte("file-url-key-of-at-least-32-bytes!!")

// Options configures Setup.
type Options struct {
	Verifier  auth.Verifier
	Workers   bool          // run in-process workers with the demo model at full speed
	DemoPace  float64       // with workers: the demo model's tokens per second instead
	KeepAlive time.Duration // default: longer than any test
	// SnapshotBytes bounds the hub's snapshots (stream.HubOptions) and
	// the messages of a branchSwitched; 0: the default.
	SnapshotBytes int
	// Files serves the file routes, files kept in PostgreSQL within
	// FileLimits (unset fields: the defaults), URLs signed with
	// FileURLKey.
	Files      bool
	FileLimits files.Limits
	// BodyTimeout, when positive, bounds request bodies as the server
	// does (guard.BodyDeadline).
	BodyTimeout time.Duration
	// WriteTimeout, when positive, is httpapi.Options.WriteTimeout, and
	// every response gets a write deadline of it from its start, as the
	// server's do.
	WriteTimeout time.Duration
	// SendBuffer, when positive, is the kernel's send buffer of every
	// connection the server accepts (SO_SNDBUF): a client that does not
	// read blocks the server's writes after about this many bytes.
	SendBuffer int
	// Connect serves ConversationService (connectapi) beside the HTTP
	// routes, on the same store, hub and authentication, as cmd/api does.
	Connect bool
}

// Setup starts a server of every protocol (httpapi.NewHandler) on a new
// database, with its hub and NOTIFY feed, stopped when the test ends.
// Without a verifier every request is the local user's.
func Setup(t testing.TB, opts ...Options) *Bundle {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	pool := pgtest.PoolWith(t, func(c *pgxpool.Config) {
		if o.SnapshotBytes > 0 {
			postgres.SetSnapshotBytes(c, o.SnapshotBytes)
		}
	})
	store := postgres.New(pool)
	var signer *files.Signer
	var urls wire.FileURLs // nil, not a nil *files.Signer, without files
	if o.Files {
		var err error
		if signer, err = files.NewSigner(FileURLKey, 0); err != nil {
			t.Fatal(err)
		}
		urls = signer
	}
	hub := wire.NewHub(stream.HubOptions[*wire.Response]{Store: store, SnapshotBytes: o.SnapshotBytes}, urls)
	feed := &stream.NotifyFeed{ConnConfig: pool.Config().ConnConfig.Copy(), Hub: hub}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { hub.Run(ctx) })
	wg.Go(func() { feed.Run(ctx) })
	if o.KeepAlive == 0 {
		o.KeepAlive = time.Minute
	}
	hopts := httpapi.Options{
		Store: store, Hub: hub, Auth: auth.Authenticator{Verifier: o.Verifier}, KeepAlive: o.KeepAlive, WriteTimeout: o.WriteTimeout,
		Models: []string{"demo"},
	}
	if o.Files {
		fileStore := postgres.NewFileStore(pool)
		hopts.Files = files.NewService(files.Options{Store: fileStore, Blobs: postgres.NewFileBlobs(pool), Limits: o.FileLimits})
		hopts.FileOwners = fileStore
		hopts.FileURLs = signer
	}
	var handler http.Handler = httpapi.NewHandler(hopts)
	if o.Connect {
		path, api := connectapi.NewHandler(connectapi.Options{Store: store, Hub: hub, Auth: hopts.Auth, FileURLs: urls})
		mux := http.NewServeMux()
		mux.Handle(path, api)
		mux.Handle("/", handler)
		handler = mux
	}
	if o.WriteTimeout > 0 {
		inner := handler
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(o.WriteTimeout))
			inner.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewUnstartedServer(guard.BodyDeadline(o.BodyTimeout, handler))
	if o.SendBuffer > 0 {
		srv.Config.ConnState = func(c net.Conn, state http.ConnState) {
			if tc, ok := c.(*net.TCPConn); ok && state == http.StateNew {
				_ = tc.SetWriteBuffer(o.SendBuffer)
			}
		}
	}
	srv.Start()
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
	if o.Workers {
		ws := worker.DefaultSettings()
		ws.DemoTokensPerSecond = -1
		if o.DemoPace > 0 {
			ws.DemoTokensPerSecond = o.DemoPace
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
			ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				t.Errorf("stop workers: %v", err)
			}
		})
	}
	return &Bundle{Pool: pool, Store: store, Q: store.Queries(), API: apiq.New(pool), URL: srv.URL, StopHub: stop, Files: hopts.Files, FileURLs: hopts.FileURLs}
}

// SetupAuth is Setup with a server that takes the tokens of TokenFor.
func SetupAuth(t testing.TB) *Bundle {
	return Setup(t, Options{Verifier: Verifier()})
}

// Verifier accepts the tokens of TokenFor.
func Verifier() auth.Verifier { return auth.NewHS256(testSecret) }

// TokenFor signs an HS256 token for user, valid one hour.
func TokenFor(t testing.TB, user string) string {
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

// Sent is a queued prompt.
type Sent struct {
	ConversationID, UserMessageID, MessageID, PromptID uuid.UUID
}

// Send sends text as owner (a new conversation when conversationID is
// uuid.Nil).
func (tb *Bundle) Send(t testing.TB, owner string, conversationID uuid.UUID, text string) Sent {
	t.Helper()
	res, err := tb.Store.SendMessage(context.Background(), conversation.SendMessageParams{
		OwnerID: owner, ConversationID: conversationID, Text: text, ModelConfigs: []json.RawMessage{json.RawMessage("{}")},
	})
	if err != nil {
		t.Fatalf("send message: %v", err)
	}
	return Sent{ConversationID: res.ConversationID, UserMessageID: res.UserMessageID,
		MessageID: res.AssistantMessageIDs[0], PromptID: res.PromptIDs[0]}
}

// The worker's side, through the SQL worker API (the test picks which
// prompt runs, without claiming it).

func (tb *Bundle) StartPrompt(t testing.TB, prompt uuid.UUID) {
	t.Helper()
	if err := tb.API.PromptStart(context.Background(), prompt); err != nil {
		t.Fatal(err)
	}
}

func (tb *Bundle) StartBlock(t testing.TB, prompt uuid.UUID, blockType, metadata string) uuid.UUID {
	t.Helper()
	id, err := tb.API.BlockStart(context.Background(), apiq.BlockStartParams{PromptID: prompt, BlockType: blockType, Metadata: []byte(metadata)})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (tb *Bundle) AppendText(t testing.TB, block uuid.UUID, deltas ...string) {
	t.Helper()
	for _, d := range deltas {
		if err := tb.API.BlockAppend(context.Background(), apiq.BlockAppendParams{BlockID: block, Delta: d}); err != nil {
			t.Fatal(err)
		}
	}
}

func (tb *Bundle) EndBlock(t testing.TB, block uuid.UUID) {
	t.Helper()
	if _, err := tb.Pool.Exec(context.Background(), "SELECT convo.end_block($1)", block); err != nil {
		t.Fatal(err)
	}
}

// ToolCall records a tool call on a tool_use block, with its output in
// progress chunks, and completes it (or fails it, when errText is set).
func (tb *Bundle) ToolCall(t testing.TB, block uuid.UUID, name, input, errText string, progress ...string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var id uuid.UUID
	if err := tb.Pool.QueryRow(ctx, "SELECT convo.start_tool_call($1, $2, $3)", block, name, input).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, p := range progress {
		if _, err := tb.Pool.Exec(ctx, "SELECT convo.tool_call_progress($1, $2)", id, p); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if errText != "" {
		_, err = tb.Pool.Exec(ctx, "SELECT convo.fail_tool_call($1, $2)", id, errText)
	} else {
		_, err = tb.Pool.Exec(ctx, "SELECT convo.complete_tool_call($1)", id)
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (tb *Bundle) CompletePrompt(t testing.TB, prompt uuid.UUID) {
	t.Helper()
	if err := tb.API.PromptComplete(context.Background(), prompt); err != nil {
		t.Fatal(err)
	}
}

func (tb *Bundle) FailPrompt(t testing.TB, prompt uuid.UUID, errText string) {
	t.Helper()
	if _, err := tb.Pool.Exec(context.Background(), "SELECT convo.fail_prompt($1, $2)", prompt, errText); err != nil {
		t.Fatal(err)
	}
}

// Rename appends one event that changes no message: a marker a stream
// reader can wait for.
func (tb *Bundle) Rename(t testing.TB, owner string, conversationID uuid.UUID, title string) {
	t.Helper()
	if _, err := tb.Store.RenameConversation(context.Background(), owner, conversationID, title); err != nil {
		t.Fatal(err)
	}
}

func (tb *Bundle) State(t testing.TB, owner string, conversationID uuid.UUID) conversation.State {
	t.Helper()
	st, err := tb.Store.State(context.Background(), owner, conversationID)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// EventsURL is the SSE stream of the conversation (GET
// /v1/conversations/{id}/events) on tb's server.
func (tb *Bundle) EventsURL(id uuid.UUID) string {
	return fmt.Sprintf("%s/v1/conversations/%s/events", tb.URL, id)
}

// Event is one Server-Sent Event as a client parses it.
type Event struct {
	ID, Name, Data string
	HasID          bool
}

// SSEClient reads an event stream over a real HTTP connection.
type SSEClient struct {
	Resp     *http.Response
	cancel   context.CancelFunc
	Events   chan Event
	Comments chan string
	Retry    chan string
	Done     chan struct{} // closed when the body ends
	Err      error         // why it ended; read after Done
}

// Do sends a request with header and body; the caller checks the status
// and cancels the request when done with it.
func Do(t testing.TB, method, url string, header http.Header, body io.Reader) (*http.Response, context.CancelFunc) {
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

// OpenSSE starts reading a stream that must answer 200. The connection
// is dropped when the test ends.
func OpenSSE(t testing.TB, method, url string, header http.Header, body io.Reader) *SSEClient {
	t.Helper()
	resp, cancel := Do(t, method, url, header, body)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("%s %s: %s %s", method, url, resp.Status, b)
	}
	c := &SSEClient{Resp: resp, cancel: cancel, Events: make(chan Event, 10_000), Comments: make(chan string, 100),
		Retry: make(chan string, 1), Done: make(chan struct{})}
	go c.read()
	t.Cleanup(c.Close)
	return c
}

// read parses the body as the SSE specification says (lines ending in
// "\n", fields "id", "event", "data", "retry", comments starting ":").
func (c *SSEClient) read() {
	defer close(c.Done)
	sc := bufio.NewScanner(c.Resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var ev Event
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data != nil {
				ev.Data = strings.Join(data, "\n")
				c.Events <- ev
			}
			ev, data = Event{}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			select {
			case c.Comments <- value:
			default: // a test that counts comments reads them as they come
			}
		case "id":
			ev.ID, ev.HasID = value, true
		case "event":
			ev.Name = value
		case "data":
			data = append(data, value)
		case "retry":
			select {
			case c.Retry <- value:
			default:
			}
		}
	}
	c.Err = sc.Err()
}

// Next returns the next event, failing the test when none comes.
func (c *SSEClient) Next(t testing.TB) Event {
	t.Helper()
	select {
	case ev := <-c.Events:
		return ev
	case <-c.Done:
		select {
		case ev := <-c.Events:
			return ev
		default:
		}
		t.Fatalf("stream ended (%v); want another event", c.Err)
	case <-time.After(WaitTimeout):
		t.Fatal("no event within the timeout")
	}
	return Event{}
}

// Ended waits for the body to end, failing the test when an event comes
// first.
func (c *SSEClient) Ended(t testing.TB) {
	t.Helper()
	select {
	case <-c.Done:
	case <-time.After(WaitTimeout):
		t.Fatal("the stream did not end")
	}
	select {
	case ev := <-c.Events:
		t.Fatalf("an event before the end: %+v", ev)
	default:
	}
}

// Close drops the connection, as a client that goes away does.
func (c *SSEClient) Close() {
	c.cancel()
	c.Resp.Body.Close()
	<-c.Done
}

// ErrorBody reads a JSON error response.
func ErrorBody(t testing.TB, resp *http.Response) (code, message string) {
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

// Bearer is the header that carries token.
func Bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// DecodeEvent decodes an SSE event's data as the Connect API's Event, checking
// that its id and name are its seq and kind.
func DecodeEvent(t testing.TB, ev Event) *convov1.Event {
	t.Helper()
	out := &convov1.Event{}
	if err := protojson.Unmarshal([]byte(ev.Data), out); err != nil {
		t.Fatalf("event %q: %v", ev.Data, err)
	}
	m := out.ProtoReflect()
	kind := m.WhichOneof(m.Descriptor().Oneofs().ByName("kind"))
	if kind == nil || ev.Name != kind.JSONName() {
		t.Fatalf("SSE event named %q carries %v", ev.Name, out)
	}
	if ev.HasID && ev.ID != strconv.FormatInt(out.Seq, 10) {
		t.Fatalf("SSE id %q, event seq %d", ev.ID, out.Seq)
	}
	return out
}
