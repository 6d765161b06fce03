package main

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

const limitsSecret = "limits-secret"

// limitsToken is an HS256 token for user, signed with limitsSecret.
func limitsToken(user string) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(map[string]any{"alg": "HS256", "typ": "JWT"}) + "." +
		enc(map[string]any{"sub": user, "exp": time.Now().Add(time.Hour).Unix()})
	mac := hmac.New(sha256.New, []byte(limitsSecret))
	mac.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// bearerInterceptor sends a user's token on every call.
type bearerInterceptor string

func (b bearerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+string(b))
		return next(ctx, req)
	}
}

func (b bearerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		return conn
	}
}

func (b bearerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func clientFor(m *Main, user string) convov1connect.ConversationServiceClient {
	return convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL(),
		connect.WithInterceptors(bearerInterceptor(limitsToken(user))))
}

// requireConnectCode asserts err has code and a message containing names.
func requireConnectCode(t *testing.T, err error, code connect.Code, names string) *connect.Error {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != code {
		t.Fatalf("err = %v; want %v", err, code)
	}
	if !strings.Contains(ce.Message(), names) {
		t.Errorf("message %q does not name %q", ce.Message(), names)
	}
	return ce
}

// requireHTTPError asserts resp is status with a JSON error of code whose
// message contains names.
func requireHTTPError(t *testing.T, resp *http.Response, status int, code, names string) {
	t.Helper()
	defer resp.Body.Close()
	var body struct{ Code, Message string }
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status || json.Unmarshal(raw, &body) != nil || body.Code != code {
		t.Fatalf("got %s %s; want %d with code %s", resp.Status, raw, status, code)
	}
	if !strings.Contains(body.Message, names) {
		t.Errorf("message %q does not name %q", body.Message, names)
	}
}

func do(t *testing.T, method, url, user, contentType, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+limitsToken(user))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// openStream opens a StreamConversation and waits for its snapshot.
func openStream(t *testing.T, ctx context.Context, client convov1connect.ConversationServiceClient, id string) (*connect.ServerStreamForClient[convov1.StreamConversationResponse], error) {
	t.Helper()
	s, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: id}))
	if err != nil {
		return nil, err
	}
	if !s.Receive() {
		s.Close()
		return nil, s.Err()
	}
	return s, nil
}

// openSSE opens GET /v1/conversations/{id}/events and waits for its
// snapshot; it returns the response (or the refusal).
func openSSE(t *testing.T, m *Main, user, id string) *http.Response {
	t.Helper()
	resp := do(t, http.MethodGet, m.URL()+"/v1/conversations/"+id+"/events", user, "", "")
	if resp.StatusCode != http.StatusOK {
		return resp
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "event: snapshot" {
	}
	return resp
}

// eventually waits up to 30 s for cond. The wait is generous: on a
// loaded 2-core machine under the race detector, cutting off ten streams
// that each marshal a 10 MB snapshot (TestStalledStreamsAreCutOff/AGUI)
// takes 8 s alone.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		<-tick.C
	}
}

// TestStreamLimits checks the per-user and per-server stream bounds over
// Connect and SSE together.
func TestStreamLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := startMain(t, map[string]string{
		"CONVO_AUTH_SECRET": limitsSecret, "CONVO_WORKERS": "0", "CONVO_WRITE_RATE": "0", "CONVO_MAX_ACTIVE_PROMPTS": "0",
		"CONVO_MAX_STREAMS_PER_USER": "2", "CONVO_MAX_STREAMS": "3",
	})
	alice, bob, carol := clientFor(m, "alice"), clientFor(m, "bob"), clientFor(m, "carol")
	send := func(client convov1connect.ConversationServiceClient, id string) string {
		res, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: id, Text: "hi"}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.ConversationId
	}
	conv := send(alice, "")
	bobConv := send(bob, "")
	carolConv := send(carol, "")

	// alice's two streams: one Connect, one SSE.
	streamCtx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	connectStream, err := openStream(t, streamCtx, alice, conv)
	if err != nil {
		t.Fatal(err)
	}
	sse := openSSE(t, m, "alice", conv)
	if sse.StatusCode != http.StatusOK {
		t.Fatalf("alice's SSE stream: %s", sse.Status)
	}

	// A third, over any protocol, is refused.
	_, err = openStream(t, ctx, alice, conv)
	requireConnectCode(t, err, connect.CodeResourceExhausted, "max streams per user")
	requireHTTPError(t, openSSE(t, m, "alice", conv), http.StatusTooManyRequests, "resource_exhausted", "max streams per user")
	requireHTTPError(t, do(t, http.MethodGet, m.URL()+"/v1/conversations/"+conv+"/agui", "alice", "", ""),
		http.StatusTooManyRequests, "resource_exhausted", "max streams per user")

	// Another user is not affected, up to the server's bound.
	bobStream, err := openStream(t, ctx, bob, bobConv)
	if err != nil {
		t.Fatalf("bob refused because of alice: %v", err)
	}
	defer bobStream.Close()
	_, err = openStream(t, ctx, carol, carolConv)
	requireConnectCode(t, err, connect.CodeResourceExhausted, "max streams per server")

	// The open streams are untouched: both see alice's next message.
	send(alice, conv)
	if !connectStream.Receive() || connectStream.Msg().GetEvent() == nil {
		t.Fatalf("alice's Connect stream after the refusals: %v", connectStream.Err())
	}
	sc := bufio.NewScanner(sse.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "event: messageCreated") {
	}
	if sc.Err() != nil || !strings.HasPrefix(sc.Text(), "event: messageCreated") {
		t.Fatalf("alice's SSE stream after the refusals: %q, %v", sc.Text(), sc.Err())
	}

	// Closing streams gives their places back.
	sse.Body.Close()
	eventually(t, "alice's closed SSE stream is released", func() bool {
		s, err := openStream(t, ctx, alice, conv)
		if err == nil {
			s.Close()
		}
		return err == nil
	})
	stopStream()
	connectStream.Close()
	bobStream.Close()
	eventually(t, "carol may stream once others closed theirs", func() bool {
		s, err := openStream(t, ctx, carol, carolConv)
		if err == nil {
			s.Close()
		}
		return err == nil
	})
}

// TestWriteRateLimit checks the per-user token bucket on writes over
// Connect and AG-UI.
func TestWriteRateLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := startMain(t, map[string]string{
		"CONVO_AUTH_SECRET": limitsSecret, "CONVO_WORKERS": "0", "CONVO_MAX_ACTIVE_PROMPTS": "0",
		"CONVO_WRITE_RATE": "0.01", "CONVO_WRITE_BURST": "2",
	})
	alice, bob := clientFor(m, "alice"), clientFor(m, "bob")
	sent, err := alice.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.RenameConversation(ctx, connect.NewRequest(&convov1.RenameConversationRequest{
		ConversationId: sent.Msg.ConversationId, Title: "renamed"})); err != nil {
		t.Fatal(err)
	}

	// The bucket is empty: writes are refused with a delay, and change nothing.
	_, err = alice.CreateConversation(ctx, connect.NewRequest(&convov1.CreateConversationRequest{}))
	ce := requireConnectCode(t, err, connect.CodeResourceExhausted, "write rate limit")
	if s, err := strconv.Atoi(ce.Meta().Get("Retry-After")); err != nil || s < 1 || s > 100 {
		t.Errorf("Retry-After %q; want 1 to 100 seconds", ce.Meta().Get("Retry-After"))
	}
	_, err = alice.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: sent.Msg.ConversationId, Text: "again"}))
	requireConnectCode(t, err, connect.CodeResourceExhausted, "write rate limit")
	// Answering and claiming input requests are writes too (the limiter
	// refuses before the request is looked up).
	_, err = alice.AnswerInput(ctx, connect.NewRequest(&convov1.AnswerInputRequest{ToolCallId: uuid.NewString(),
		Answer: &convov1.InputAnswer{Kind: &convov1.InputAnswer_Approval{Approval: &convov1.ApprovalAnswer{Approved: true}}}}))
	requireConnectCode(t, err, connect.CodeResourceExhausted, "write rate limit")
	_, err = alice.ClaimInput(ctx, connect.NewRequest(&convov1.ClaimInputRequest{ToolCallId: uuid.NewString(), Claimant: "tab-1"}))
	requireConnectCode(t, err, connect.CodeResourceExhausted, "write rate limit")
	resp := do(t, http.MethodPost, m.URL()+"/v1/agui", "alice", "application/json",
		`{"threadId":"`+sent.Msg.ConversationId+`","messages":[{"id":"u1","role":"user","content":"hello"}]}`)
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("POST /v1/agui refused without Retry-After")
	}
	requireHTTPError(t, resp, http.StatusTooManyRequests, "resource_exhausted", "write rate limit")
	resp = do(t, http.MethodPost, m.URL()+"/v1/ai-sdk/chat", "alice", "application/json",
		`{"id":"`+sent.Msg.ConversationId+`","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hello"}]}]}`)
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("POST /v1/ai-sdk/chat refused without Retry-After")
	}
	requireHTTPError(t, resp, http.StatusTooManyRequests, "resource_exhausted", "write rate limit")
	list, err := alice.ListConversations(ctx, connect.NewRequest(&convov1.ListConversationsRequest{}))
	if err != nil || len(list.Msg.Conversations) != 1 {
		t.Fatalf("alice's conversations after refusals: %v, %v; want the one", list, err)
	}
	got, err := alice.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.Msg.ConversationId}))
	if err != nil || len(got.Msg.Messages) != 2 {
		t.Fatalf("alice's conversation after refusals: %v, %v; want 2 messages", got, err)
	}

	// Reads, and cancelling a reply, are not writes that the bucket bounds.
	if _, err := alice.CancelPrompt(ctx, connect.NewRequest(&convov1.CancelPromptRequest{PromptId: sent.Msg.PromptId})); err != nil {
		t.Errorf("cancel with an empty bucket: %v", err)
	}
	// Other users have their own buckets.
	if _, err := bob.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "hi"})); err != nil {
		t.Errorf("bob refused because of alice: %v", err)
	}
}

// TestSearchRateLimit checks CONVO_SEARCH_RATE and CONVO_SEARCH_BURST:
// searches have a bucket of their own, so a user who has searched their
// fill can still write, and one who has written can still search.
func TestSearchRateLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := startMain(t, map[string]string{
		"CONVO_AUTH_SECRET": limitsSecret, "CONVO_WORKERS": "0", "CONVO_MAX_ACTIVE_PROMPTS": "0",
		"CONVO_WRITE_RATE": "0.01", "CONVO_WRITE_BURST": "1", "CONVO_SEARCH_RATE": "0.01", "CONVO_SEARCH_BURST": "2",
	})
	alice, bob := clientFor(m, "alice"), clientFor(m, "bob")
	search := func(c convov1connect.ConversationServiceClient) error {
		_, err := c.SearchMessages(ctx, connect.NewRequest(&convov1.SearchMessagesRequest{Query: "hello"}))
		return err
	}
	for i := range 2 {
		if err := search(alice); err != nil {
			t.Fatalf("search %d of the burst: %v", i, err)
		}
	}
	ce := requireConnectCode(t, search(alice), connect.CodeResourceExhausted, "search rate limit")
	if s, err := strconv.Atoi(ce.Meta().Get("Retry-After")); err != nil || s < 1 || s > 100 {
		t.Errorf("Retry-After %q; want 1 to 100 seconds", ce.Meta().Get("Retry-After"))
	}
	if _, err := alice.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "hello"})); err != nil {
		t.Errorf("a write refused after searches: %v", err)
	}
	if _, err := bob.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "hello"})); err != nil {
		t.Fatal(err)
	}
	if err := search(bob); err != nil {
		t.Errorf("a search refused after a write: %v", err)
	}
}

// TestActivePromptCap checks CONVO_MAX_ACTIVE_PROMPTS through both APIs.
func TestActivePromptCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := startMain(t, map[string]string{
		"CONVO_AUTH_SECRET": limitsSecret, "CONVO_WORKERS": "0", "CONVO_WRITE_RATE": "0", "CONVO_MAX_ACTIVE_PROMPTS": "1",
	})
	alice, bob := clientFor(m, "alice"), clientFor(m, "bob")
	sent, err := alice.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = alice.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: sent.Msg.ConversationId, Text: "more"}))
	requireConnectCode(t, err, connect.CodeResourceExhausted, "max_active_prompts")
	requireHTTPError(t, do(t, http.MethodPost, m.URL()+"/v1/agui", "alice", "application/json",
		`{"threadId":"`+sent.Msg.ConversationId+`","messages":[{"id":"u1","role":"user","content":"hello"}]}`),
		http.StatusTooManyRequests, "resource_exhausted", "max_active_prompts")
	got, err := alice.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.Msg.ConversationId}))
	if err != nil || len(got.Msg.Messages) != 2 {
		t.Fatalf("after refusals: %v, %v; want 2 messages", got, err)
	}
	if _, err := bob.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "hi"})); err != nil {
		t.Errorf("bob refused because of alice: %v", err)
	}
	// A finished (here cancelled) prompt frees its place.
	if _, err := alice.CancelPrompt(ctx, connect.NewRequest(&convov1.CancelPromptRequest{PromptId: sent.Msg.PromptId})); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: sent.Msg.ConversationId, Text: "more"})); err != nil {
		t.Errorf("after cancelling: %v", err)
	}
}

// TestLimitsConfig checks the limits' variables and flags.
func TestLimitsConfig(t *testing.T) {
	t.Parallel()
	parse := func(args []string, env map[string]string) (Limits, error) {
		m := NewMain()
		err := m.ParseFlags(args, func(k string) string { return env[k] })
		return m.Config.Limits, err
	}
	l, err := parse(nil, nil)
	if err != nil || l != DefaultLimits() {
		t.Fatalf("defaults = %+v, %v", l, err)
	}
	l, err = parse([]string{"--max-streams", "9"}, map[string]string{
		"CONVO_MAX_STREAMS_PER_USER": "3", "CONVO_MAX_STREAMS": "7", "CONVO_WRITE_RATE": "0.5",
		"CONVO_WRITE_BURST": "5", "CONVO_MAX_ACTIVE_PROMPTS": "0",
		"CONVO_SEARCH_RATE": "0.25", "CONVO_SEARCH_BURST": "3", "CONVO_MAX_SEARCHES": "0", "CONVO_SEARCH_TIMEOUT": "1500ms",
		"CONVO_MAX_READS_PER_USER": "2", "CONVO_MAX_PENDING_SENDS": "50"})
	want := Limits{
		MaxStreamsPerUser: 3, MaxStreams: 9, WriteRate: 0.5, WriteBurst: 5, MaxActivePrompts: 0,
		SearchRate: 0.25, SearchBurst: 3, MaxSearches: 0, SearchTimeout: 1500 * time.Millisecond, MaxReadsPerUser: 2,
		MaxPendingSends: 50,
	}
	if err != nil || l != want {
		t.Errorf("configured = %+v, %v; want %+v", l, err, want)
	}
	for _, bad := range []map[string]string{
		{"CONVO_MAX_STREAMS": "-1"}, {"CONVO_WRITE_RATE": "fast"}, {"CONVO_MAX_ACTIVE_PROMPTS": "x"},
		{"CONVO_WRITE_BURST": "0"}, {"CONVO_SEARCH_RATE": "-1"}, {"CONVO_SEARCH_BURST": "0"},
		{"CONVO_MAX_SEARCHES": "-2"}, {"CONVO_SEARCH_TIMEOUT": "3"}, {"CONVO_SEARCH_TIMEOUT": "-1s"},
		{"CONVO_MAX_READS_PER_USER": "-1"}, {"CONVO_MAX_READS_PER_USER": "many"},
		{"CONVO_MAX_PENDING_SENDS": "-1"}, {"CONVO_MAX_PENDING_SENDS": "lots"},
	} {
		if _, err := parse(nil, bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
