package main

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testbin"
	"github.com/convo-dev/convo/pglisten"
)

func TestMain(m *testing.M) { pgtest.Main(m, testbin.Remove) }

// apiPkg is this command, which the tests that run the server as a process
// build with testbin.Build: once, with the race detector when the tests
// have it, and shared by every such test.
const apiPkg = "github.com/convo-dev/convo/cmd/api"

// startMain runs the production wiring on a test database (a new one
// unless env sets DATABASE_URL).
func startMain(t *testing.T, env map[string]string) *Main {
	t.Helper()
	m := NewMain()
	m.Stdout = io.Discard
	// A reply in flight at Close gets a short drain: tests do not wait
	// for the demo model to finish.
	all := map[string]string{"CONVO_HTTP_ADDR": "127.0.0.1:0", "CONVO_LOG_LEVEL": "warn", "CONVO_DRAIN_TIMEOUT": "1s"}
	for k, v := range env {
		all[k] = v
	}
	if all["DATABASE_URL"] == "" {
		all["DATABASE_URL"] = pgtest.DSN(t)
	}
	if err := m.ParseFlags(nil, func(k string) string { return all[k] }); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestProtocols checks that the server answers the Connect protocol over
// HTTP/1.1, gRPC over unencrypted HTTP/2, and gRPC-Web.
func TestProtocols(t *testing.T) {
	t.Parallel()
	m := startMain(t, nil)
	h2c := &http.Client{Transport: &http.Transport{Protocols: unencryptedHTTP2()}}

	for name, client := range map[string]convov1connect.ConversationServiceClient{
		"ConnectHTTP1": convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL()),
		"GRPCOverH2C":  convov1connect.NewConversationServiceClient(h2c, m.URL(), connect.WithGRPC()),
		"GRPCWeb":      convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL(), connect.WithGRPCWeb()),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			sent, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "over " + name}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.Msg.ConversationId}))
			if err != nil {
				t.Fatal(err)
			}
			if got.Msg.Conversation.Title != "over "+name {
				t.Errorf("title = %q", got.Msg.Conversation.Title)
			}
		})
	}
}

// TestAuthSecretRequiresTokens checks the CONVO_AUTH_SECRET wiring.
func TestAuthSecretRequiresTokens(t *testing.T) {
	t.Parallel()
	m := startMain(t, map[string]string{"CONVO_AUTH_SECRET": "a-secret"})
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	_, err := client.ListConversations(context.Background(), connect.NewRequest(&convov1.ListConversationsRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("without a token: %v, want Unauthenticated", err)
	}
}

func unencryptedHTTP2() *http.Protocols {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return p
}

// TestOneListener checks that the server holds one LISTEN connection,
// shared by the stream feed and the in-process workers, and that both
// still hear their notifications through it: a message sent gets the demo
// worker's reply (convo_prompts) and a stream sees it (convo_events).
func TestOneListener(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	m := startMain(t, map[string]string{"DATABASE_URL": dsn, "CONVO_WORKERS": "2", "CONVO_DEMO_TOKENS_PER_SECOND": "2000"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	sent, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "one listener"}))
	if err != nil {
		t.Fatal(err)
	}
	st, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: sent.Msg.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for st.Receive() {
		if st.Msg().GetEvent().GetPromptCompleted() != nil {
			break
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream ended before the reply completed: %v", err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var listeners int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()`, pglisten.ApplicationName).Scan(&listeners); err != nil {
		t.Fatal(err)
	}
	if listeners != 1 {
		t.Errorf("%d LISTEN connections, want 1 shared by the feed and the workers", listeners)
	}
}
