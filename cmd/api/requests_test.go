package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// bodyRoute is a route that takes a request body, with a valid body.
type bodyRoute struct {
	name, path, body string
	// limit is the most of a body the route takes.
	limit int64
}

// bodyRoutes are the routes whose bodies write: SendMessage over Connect,
// AG-UI's run and the AI SDK's chat.
func bodyRoutes() []bodyRoute {
	return []bodyRoute{
		{"SendMessage", "/convo.v1.ConversationService/SendMessage", `{"text":"hello"}`, 1<<20 + 64<<10},
		{"AGUI", "/v1/agui", `{"messages":[{"id":"u1","role":"user","content":"hello"}]}`, 4 << 20},
		{"AISDK", "/v1/ai-sdk/chat", `{"id":"` + uuid.NewString() + `","trigger":"submit-message",` +
			`"messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hello"}]}]}`, 8 << 20},
	}
}

// dbState is what convo's tables hold: one hash of every table's rows, so
// that a test can tell that a request changed nothing.
func dbState(t *testing.T, m *Main) string {
	t.Helper()
	var s string
	err := m.pool.QueryRow(context.Background(), `
		SELECT string_agg(table_name || '=' || (xpath('/row/h/text()', query_to_xml(format(
		         'SELECT md5(coalesce(string_agg(t::text, %L ORDER BY t::text), %L)) AS h FROM convo.%I t', '|', '', table_name),
		         false, true, '')))[1]::text, ' ' ORDER BY table_name)
		  FROM information_schema.tables WHERE table_schema = 'convo' AND table_type = 'BASE TABLE'`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// requireUnchanged fails when convo's tables no longer hold before.
func requireUnchanged(t *testing.T, m *Main, before, what string) {
	t.Helper()
	if after := dbState(t, m); after != before {
		t.Errorf("%s changed the database:\nbefore %s\nafter  %s", what, before, after)
	}
}

// rawPost opens a connection to the server and sends the headers of a
// POST of path (JSON, Content-Length n when n >= 0, else chunked), with
// the Authorization header unless it is empty. The body is the caller's
// to send.
func rawPost(t *testing.T, m *Main, path, authorization string, n int64) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", m.listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var h strings.Builder
	fmt.Fprintf(&h, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n", path)
	if authorization != "" {
		fmt.Fprintf(&h, "Authorization: %s\r\n", authorization)
	}
	if n >= 0 {
		fmt.Fprintf(&h, "Content-Length: %d\r\n", n)
	} else {
		h.WriteString("Transfer-Encoding: chunked\r\n")
	}
	h.WriteString("\r\n")
	if _, err := io.WriteString(conn, h.String()); err != nil {
		t.Fatal(err)
	}
	return conn
}

// rawAnswer reads the answer on conn, waiting at most within: the
// response, or nil when the server closed the connection without one.
func rawAnswer(t *testing.T, conn net.Conn, within time.Duration) (*http.Response, []byte) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("no answer within %v: the server is still reading the body", within)
	case err != nil:
		return nil, nil // closed without an answer
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body
}

// requireClosed waits up to within for the server to close conn.
func requireClosed(t *testing.T, conn net.Conn, within time.Duration) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection is still open after %v", within)
	}
}

// errorCode is the "code" of a JSON error body (the HTTP routes' and the
// Connect protocol's).
func errorCode(body []byte) string {
	var e struct{ Code, Message string }
	_ = json.Unmarshal(body, &e)
	return e.Code
}

// TestSlowBodiesAreCutOff sends each body route a body of 1000 bytes at
// one byte a second, with and without a token: the server must cut the
// client off once CONVO_BODY_TIMEOUT has passed, and write nothing.
func TestSlowBodiesAreCutOff(t *testing.T) {
	t.Parallel()
	m := startMain(t, map[string]string{"CONVO_AUTH_SECRET": limitsSecret, "CONVO_WORKERS": "0", "CONVO_BODY_TIMEOUT": "1s"})
	before := dbState(t, m)
	for _, route := range bodyRoutes() {
		for _, user := range []string{"alice", ""} {
			name := route.name + map[bool]string{true: "WithToken", false: "WithoutToken"}[user != ""]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				authorization := ""
				if user != "" {
					authorization = "Bearer " + limitsToken(user)
				}
				conn := rawPost(t, m, route.path, authorization, 1000)
				body := route.body + strings.Repeat(" ", 1000-len(route.body))
				go func() {
					for i := range len(body) {
						if _, err := io.WriteString(conn, body[i:i+1]); err != nil {
							return
						}
						time.Sleep(time.Second)
					}
				}()
				start := time.Now()
				resp, raw := rawAnswer(t, conn, 8*time.Second)
				if resp != nil {
					want := map[bool]int{true: http.StatusRequestTimeout, false: http.StatusUnauthorized}[user != ""]
					if route.name == "SendMessage" && user != "" {
						want = http.StatusGatewayTimeout // Connect's deadline_exceeded
					}
					if resp.StatusCode != want {
						t.Errorf("answered %s %s; want %d", resp.Status, raw, want)
					}
				}
				requireClosed(t, conn, 5*time.Second)
				t.Logf("cut off after %v (%v)", time.Since(start).Round(100*time.Millisecond), map[bool]string{true: "answered", false: "closed"}[resp != nil])
			})
		}
	}
	t.Cleanup(func() { requireUnchanged(t, m, before, "slow requests") })
}

// TestAuthenticationBeforeBody sends each body route the headers of a 5 MB
// body without a token, and no body: the server must refuse it at once,
// without waiting for the body. The Connect calls refused so are counted
// in the RPC metrics as any other.
func TestAuthenticationBeforeBody(t *testing.T) {
	t.Parallel()
	m := startMain(t, map[string]string{"CONVO_AUTH_SECRET": limitsSecret, "CONVO_WORKERS": "0", "CONVO_PUBLIC_METRICS": "true"})
	for _, route := range bodyRoutes() {
		for _, authorization := range []string{"", "Bearer not-a-token"} {
			conn := rawPost(t, m, route.path, authorization, 5<<20)
			resp, raw := rawAnswer(t, conn, 3*time.Second)
			if resp == nil || resp.StatusCode != http.StatusUnauthorized || errorCode(raw) != "unauthenticated" {
				t.Fatalf("%s with %q: answered %v %s; want 401 unauthenticated", route.name, authorization, resp, raw)
			}
		}
	}
	refused := scrapeMetrics(t, m.URL()).value("convo_rpc_calls_total",
		"procedure", "/convo.v1.ConversationService/SendMessage", "code", "unauthenticated")
	if refused != 2 {
		t.Errorf("convo_rpc_calls_total of SendMessage unauthenticated = %v; want 2", refused)
	}
}

// TestBodySizeLimits sends each body route the headers of a 200 MB body
// and 2 MB of it, once with Content-Length and once chunked: the server
// must refuse it after reading at most its limit (here: without waiting
// for more than was sent), and write nothing.
func TestBodySizeLimits(t *testing.T) {
	t.Parallel()
	m := startMain(t, map[string]string{"CONVO_AUTH_SECRET": limitsSecret, "CONVO_WORKERS": "0"})
	before := dbState(t, m)
	for _, route := range bodyRoutes() {
		for _, length := range []int64{200 << 20, -1} {
			name := route.name + map[bool]string{true: "ContentLength", false: "Chunked"}[length > 0]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				conn := rawPost(t, m, route.path, "Bearer "+limitsToken("alice"), length)
				// Just over the route's limit (so that a server that reads
				// at most the limit has what it needs to refuse), then
				// nothing: a server that wants the whole body waits.
				sent := min(route.limit+1, 2<<20)
				if length < 0 {
					sent = route.limit + 1
				}
				go func() {
					chunk := []byte(strings.Repeat("x", 64<<10))
					for left := sent; left > 0; left -= int64(len(chunk)) {
						c := chunk[:min(int64(len(chunk)), left)]
						var err error
						if length < 0 {
							_, err = fmt.Fprintf(conn, "%x\r\n%s\r\n", len(c), c)
						} else {
							_, err = conn.Write(c)
						}
						if err != nil {
							return
						}
					}
				}()
				resp, raw := rawAnswer(t, conn, 10*time.Second)
				if resp == nil {
					t.Fatal("closed without an answer")
				}
				want, code := http.StatusRequestEntityTooLarge, "invalid_argument"
				if route.name == "SendMessage" {
					want, code = http.StatusTooManyRequests, "resource_exhausted" // Connect's code for it
				}
				if resp.StatusCode != want || errorCode(raw) != code || !strings.Contains(string(raw), "larger than") {
					t.Errorf("answered %s %s; want %d %s saying the body is too large", resp.Status, raw, want, code)
				}
			})
		}
	}
	t.Cleanup(func() { requireUnchanged(t, m, before, "oversized requests") })
}

// TestStreamsOutliveBodyTimeout checks that the body's deadline bounds
// the body only: streams that answer a request (StreamConversation over
// HTTP/1.1 and gRPC over h2c, AG-UI's and the AI SDK's POSTs, which read
// a body first) go on long past CONVO_BODY_TIMEOUT.
func TestStreamsOutliveBodyTimeout(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	m := startMain(t, map[string]string{
		"CONVO_BODY_TIMEOUT": timeout.String(), "CONVO_WORKERS": "2", "CONVO_DEMO_TOKENS_PER_SECOND": "4", "CONVO_LOG_LEVEL": "error",
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// alive reports, once, that a stream delivered something more than
	// three deadlines after it started, or why it did not.
	alive := make(chan error, 4)
	watch := func(name string, next func() bool, err func() error) {
		start := time.Now()
		go func() {
			for next() {
				if time.Since(start) > 3*timeout {
					alive <- nil
					return
				}
			}
			alive <- fmt.Errorf("%s ended after %v: %v", name, time.Since(start), err())
		}()
	}
	post := func(name, path, body string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.URL()+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", name, resp.Status)
		}
		sc := bufio.NewScanner(resp.Body)
		watch(name, sc.Scan, sc.Err)
	}
	aguiThread, chat := uuid.NewString(), uuid.NewString()
	post("AG-UI", "/v1/agui", `{"threadId":"`+aguiThread+`","messages":[{"id":"u1","role":"user","content":"hello"}]}`)
	post("AI SDK", "/v1/ai-sdk/chat", `{"id":"`+chat+`","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hello"}]}]}`)
	for name, client := range map[string]convov1connect.ConversationServiceClient{
		"Connect over HTTP/1.1": convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL()),
		"gRPC over h2c": convov1connect.NewConversationServiceClient(&http.Client{Transport: &http.Transport{Protocols: unencryptedHTTP2()}},
			m.URL(), connect.WithGRPC()),
	} {
		id := aguiThread
		if strings.HasPrefix(name, "gRPC") {
			id = chat
		}
		s, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: id}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		watch(name, s.Receive, s.Err)
	}
	for range 4 {
		if err := <-alive; err != nil {
			t.Error(err)
		}
	}
}

// TestRefusalsChangeNothing makes every body route refuse requests for
// every reason it has (the cap on prompts in flight, the stream limit,
// bad input, no token, a host not served) and checks that each refusal
// leaves convo's tables as they were; in particular AG-UI and the AI SDK
// create no conversation for a request they then refuse.
func TestRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := startMain(t, map[string]string{
		"CONVO_AUTH_SECRET": limitsSecret, "CONVO_WORKERS": "0", "CONVO_WRITE_RATE": "0",
		"CONVO_MAX_ACTIVE_PROMPTS": "1", "CONVO_MAX_STREAMS_PER_USER": "1", "CONVO_ALLOWED_HOSTS": "convo.example",
	})
	// busy has a prompt in flight, the cap; streaming holds its one stream.
	busy := clientFor(m, "busy")
	sent, err := busy.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	streaming := clientFor(m, "streaming")
	own, err := streaming.CreateConversation(ctx, connect.NewRequest(&convov1.CreateConversationRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	streamCtx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	stream, err := openStream(t, streamCtx, streaming, own.Msg.Conversation.Id)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()

	agui := func(thread, text string) string {
		in := map[string]any{"messages": []map[string]any{{"id": uuid.NewString(), "role": "user", "content": text}}}
		if thread != "" {
			in["threadId"] = thread
		}
		b, _ := json.Marshal(in)
		return string(b)
	}
	chat := func(id, text string) string {
		b, _ := json.Marshal(map[string]any{"id": id, "trigger": "submit-message", "messages": []map[string]any{
			{"id": uuid.NewString(), "role": "user", "parts": []map[string]any{{"type": "text", "text": text}}}}})
		return string(b)
	}
	const sendPath = "/convo.v1.ConversationService/SendMessage"
	for _, c := range []struct {
		name, user, host, path, body string
		status                       int
	}{
		{"CapSendMessage", "busy", "", sendPath, `{"text":"more"}`, http.StatusTooManyRequests},
		{"CapAGUINewThread", "busy", "", "/v1/agui", agui(uuid.NewString(), "more"), http.StatusTooManyRequests},
		{"CapAGUINoThread", "busy", "", "/v1/agui", agui("", "more"), http.StatusTooManyRequests},
		{"CapAGUIThread", "busy", "", "/v1/agui", agui(sent.Msg.ConversationId, "more"), http.StatusTooManyRequests},
		{"CapAISDKNewChat", "busy", "", "/v1/ai-sdk/chat", chat(uuid.NewString(), "more"), http.StatusTooManyRequests},
		{"CapAISDKChat", "busy", "", "/v1/ai-sdk/chat", chat(sent.Msg.ConversationId, "more"), http.StatusTooManyRequests},
		{"CapAISDKRegenerate", "busy", "", "/v1/ai-sdk/chat",
			`{"id":"` + sent.Msg.ConversationId + `","trigger":"regenerate-message","messages":[]}`, http.StatusTooManyRequests},
		{"StreamLimitAGUINewThread", "streaming", "", "/v1/agui", agui(uuid.NewString(), "hello"), http.StatusTooManyRequests},
		{"StreamLimitAGUINoThread", "streaming", "", "/v1/agui", agui("", "hello"), http.StatusTooManyRequests},
		{"StreamLimitAISDKNewChat", "streaming", "", "/v1/ai-sdk/chat", chat(uuid.NewString(), "hello"), http.StatusTooManyRequests},
		{"BadInputSendMessage", "alice", "", sendPath, `{"text":" "}`, http.StatusBadRequest},
		{"BadInputAGUI", "alice", "", "/v1/agui", agui(uuid.NewString(), " "), http.StatusBadRequest},
		{"BadInputAISDK", "alice", "", "/v1/ai-sdk/chat", chat(uuid.NewString(), " "), http.StatusBadRequest},
		{"NoTokenSendMessage", "", "", sendPath, `{"text":"hello"}`, http.StatusUnauthorized},
		{"NoTokenAGUI", "", "", "/v1/agui", agui(uuid.NewString(), "hello"), http.StatusUnauthorized},
		{"NoTokenAISDK", "", "", "/v1/ai-sdk/chat", chat(uuid.NewString(), "hello"), http.StatusUnauthorized},
		{"HostNotServedSendMessage", "alice", "evil.example", sendPath, `{"text":"hello"}`, http.StatusForbidden},
		{"HostNotServedAGUI", "alice", "evil.example", "/v1/agui", agui(uuid.NewString(), "hello"), http.StatusForbidden},
		{"HostNotServedAISDK", "alice", "evil.example", "/v1/ai-sdk/chat", chat(uuid.NewString(), "hello"), http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := dbState(t, m)
			req, err := http.NewRequest(http.MethodPost, m.URL()+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if c.user != "" {
				req.Header.Set("Authorization", "Bearer "+limitsToken(c.user))
			}
			if c.host != "" {
				req.Host = c.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("answered %s %s; want %d", resp.Status, body, c.status)
			}
			requireUnchanged(t, m, before, "the refusal")
		})
	}
}

// TestTextMustShowSomething sends messages and titles that show nothing
// (only zero-width characters, only bidi controls, only whitespace and
// control characters), titles with control characters, and lone UTF-16
// surrogates in JSON, over every route that takes them: each is refused
// 400 / invalid_argument naming the field, and changes nothing.
func TestTextMustShowSomething(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := startMain(t, map[string]string{"CONVO_WORKERS": "0", "CONVO_WRITE_RATE": "0"})
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	sent, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	conv := sent.Msg.ConversationId
	const rpc = "/convo.v1.ConversationService/"
	// The JSON of a string, as written: escapes such as \ud800 stay.
	agui := func(content string) string {
		return `{"threadId":"` + uuid.NewString() + `","messages":[{"id":"u1","role":"user","content":"` + content + `"}]}`
	}
	chat := func(text string) string {
		return `{"id":"` + uuid.NewString() + `","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"` + text + `"}]}]}`
	}
	texts := map[string]string{
		"ZeroWidth":     `\u200b\u200c\u200d\u2060\ufeff`,
		"BidiControls":  `\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069`,
		"SpaceControls": ` \t\r\n\u001b\u0007\u00a0\u3000`,
		// The soft hyphen, a combining grapheme joiner, Hangul fillers, a
		// variation selector: default-ignorable, as the web app's editor
		// and composer count them too (showsSomething).
		"Ignorable": `\u00ad\u034f\u3164\u115f\ufe0f`,
		// Symbols drawn blank: U+2800 BRAILLE PATTERN BLANK, U+1D159
		// MUSICAL SYMBOL NULL NOTEHEAD (a surrogate pair in JSON).
		"Blank": `\u2800\u2800 \ud834\udd59`,
	}
	type refusal struct{ name, path, body, field string }
	var cases []refusal
	for name, text := range texts {
		cases = append(cases,
			refusal{"SendMessage" + name, rpc + "SendMessage", `{"conversationId":"` + conv + `","text":"` + text + `"}`, "text"},
			refusal{"EditMessage" + name, rpc + "EditMessage", `{"conversationId":"` + conv + `","messageId":"` + sent.Msg.UserMessageId + `","text":"` + text + `"}`, "text"},
			refusal{"AGUI" + name, "/v1/agui", agui(text), "messages[0].content"},
			refusal{"AISDK" + name, "/v1/ai-sdk/chat", chat(text), "messages[0].parts"},
			refusal{"CreateTitle" + name, rpc + "CreateConversation", `{"title":"` + text + `"}`, "title"},
			refusal{"RenameTitle" + name, rpc + "RenameConversation", `{"conversationId":"` + conv + `","title":"` + text + `"}`, "title"},
		)
	}
	for name, title := range map[string]string{"CRLF": `two\r\nlines`, "Tab": `a\tb`, "Escape": `\u001b[2Jred`, "Bell": `ding\u0007`, "Delete": `x\u007f`, "C1": `x\u0085`, "LineSeparator": `two\u2028lines`, "ParagraphSeparator": `two\u2029paragraphs`} {
		cases = append(cases,
			refusal{"CreateTitle" + name, rpc + "CreateConversation", `{"title":"` + title + `"}`, "title"},
			refusal{"RenameTitle" + name, rpc + "RenameConversation", `{"conversationId":"` + conv + `","title":"` + title + `"}`, "title"},
		)
	}
	for name, s := range map[string]string{"LoneHigh": `a\ud800b`, "LoneLow": `\udc00`, "Reversed": `\ude00\ud83d`} {
		cases = append(cases,
			refusal{"SendMessage" + name, rpc + "SendMessage", `{"text":"` + s + `"}`, "text"},
			refusal{"EditMessage" + name, rpc + "EditMessage", `{"conversationId":"` + conv + `","messageId":"` + sent.Msg.UserMessageId + `","text":"` + s + `"}`, "text"},
			refusal{"AGUI" + name, "/v1/agui", agui(s), "messages[0].content"},
			refusal{"AISDK" + name, "/v1/ai-sdk/chat", chat(s), "messages[0].parts[0].text"},
			refusal{"CreateTitle" + name, rpc + "CreateConversation", `{"title":"` + s + `"}`, "title"},
			refusal{"RenameTitle" + name, rpc + "RenameConversation", `{"conversationId":"` + conv + `","title":"` + s + `"}`, "title"},
		)
	}
	before := dbState(t, m)
	// An accepted AG-UI or AI SDK request streams its reply, which no
	// worker writes here: the timeout ends it.
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := hc.Post(m.URL()+c.path, "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			requireHTTPError(t, resp, http.StatusBadRequest, "invalid_argument", c.field+": ")
		})
	}
	requireUnchanged(t, m, before, "text that shows nothing")

	// A surrogate pair is a character like any other, and a visible
	// character among invisible ones is enough.
	for _, body := range []string{`{"text":"\ud83d\ude00"}`, `{"text":"\u200b\u202eok"}`} {
		resp, err := http.Post(m.URL()+rpc+"SendMessage", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", body, resp.Status)
		}
	}
}

// TestBodyTimeoutSetting checks CONVO_BODY_TIMEOUT and --body-timeout.
func TestBodyTimeoutSetting(t *testing.T) {
	t.Parallel()
	parse := func(args []string, env map[string]string) (time.Duration, error) {
		m := NewMain()
		err := m.ParseFlags(args, func(k string) string { return env[k] })
		return m.Config.BodyTimeout, err
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want time.Duration
	}{
		{nil, nil, 10 * time.Second},
		{nil, map[string]string{"CONVO_BODY_TIMEOUT": "3s"}, 3 * time.Second},
		{[]string{"--body-timeout", "1m"}, map[string]string{"CONVO_BODY_TIMEOUT": "3s"}, time.Minute},
		{nil, map[string]string{"CONVO_BODY_TIMEOUT": "0"}, 0},
	} {
		if got, err := parse(c.args, c.env); err != nil || got != c.want {
			t.Errorf("%v %v: %v, %v; want %v", c.args, c.env, got, err, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{nil, map[string]string{"CONVO_BODY_TIMEOUT": "soon"}},
		{nil, map[string]string{"CONVO_BODY_TIMEOUT": "-1s"}},
		{[]string{"--body-timeout", "-1s"}, nil},
	} {
		if _, err := parse(c.args, c.env); err == nil || !strings.Contains(err.Error(), "body-timeout") && !strings.Contains(err.Error(), "CONVO_BODY_TIMEOUT") {
			t.Errorf("%v %v: %v; want an error naming the setting", c.args, c.env, err)
		}
	}
}
