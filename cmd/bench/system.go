package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/connectapi"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

// benchOwner owns every conversation the bench creates; the bench's
// authenticator makes every request act for it, and Close deletes its
// conversations from a --database-url database.
const benchOwner = "convo-bench"

// benchToken is the bearer token the bench's clients send.
const benchToken = "bench"

// system is the server under test, wired as cmd/api wires it: one hub fed
// by one feed, and the Connect handler on an HTTP server that speaks h2c.
type system struct {
	feed   string
	hub    *wire.Hub
	url    string
	server *http.Server

	stop     context.CancelFunc
	bg       sync.WaitGroup
	serveErr chan error
}

func (m *Main) startSystem(ctx context.Context, feed string) (*system, error) {
	s := &system{feed: feed, serveErr: make(chan error, 1)}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = cancel
	s.hub = wire.NewHub(stream.HubOptions[*wire.Response]{Store: m.store, Logger: m.Logger}, nil)
	run, err := startFeed(ctx, feed, m.pool.Config().ConnConfig.Copy(), s.hub, m.Logger)
	if err != nil {
		cancel()
		return nil, err
	}
	s.bg.Go(func() { s.hub.Run(bg) })
	s.bg.Go(func() { run(bg) })

	path, handler := connectapi.NewHandler(connectapi.Options{
		Store: m.store, Hub: s.hub, Logger: m.Logger,
		Auth: auth.Authenticator{Verifier: benchVerifier{}},
	})
	mux := http.NewServeMux()
	mux.Handle(path, handler)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.close()
		return nil, err
	}
	// The settings of cmd/api's server: no write timeout (it would cut
	// streams), HTTP/1.1 and h2c.
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	s.server = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		Protocols:         protocols,
		ErrorLog:          slog.NewLogLogger(m.Logger.Handler(), slog.LevelWarn),
	}
	s.url = "http://" + ln.Addr().String()
	go func() { s.serveErr <- s.server.Serve(ln) }()
	return s, nil
}

// close ends the streams (the hub stops first, as in cmd/api), then the
// server.
func (s *system) close() {
	s.stop()
	s.bg.Wait()
	if s.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.server.Shutdown(ctx) //nolint:errcheck // best effort: the bench is done with it
		<-s.serveErr
	}
}

// benchVerifier accepts any token as benchOwner.
type benchVerifier struct{}

func (benchVerifier) Verify(context.Context, string) (string, error) { return benchOwner, nil }

// viaKinds are the ways a latency subscriber can listen: "web" is a
// StreamConversation client configured as connect-web is (the web app's:
// JSON, no compression), "go" one with connect-go's defaults (binary
// protobuf, gzip accepted), "hub" a Hub.Open subscription read with Next in
// this process.
var viaKinds = []string{"web", "go", "hub"}

// isConnect reports whether via is a kind of StreamConversation client.
func isConnect(via string) bool { return via == "web" || via == "go" }

// clientSet is ceil(n/perConn) Connect clients of kind via, each on its own
// h2c connection (one http.Transport each), as many browsers would hold.
type clientSet struct {
	clients    []convov1connect.ConversationServiceClient
	transports []*http.Transport
}

func newClientSet(url, via string, n, perConn int) *clientSet {
	opts := []connect.ClientOption{connect.WithInterceptors(bearer(benchToken))}
	if via == "web" {
		opts = append(opts, connect.WithProtoJSON(), connect.WithAcceptCompression("gzip", nil, nil))
	}
	cs := &clientSet{}
	for range (n + perConn - 1) / perConn {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		t := &http.Transport{Protocols: p}
		cs.transports = append(cs.transports, t)
		cs.clients = append(cs.clients, convov1connect.NewConversationServiceClient(&http.Client{Transport: t}, url, opts...))
	}
	return cs
}

// client returns the client of the i-th stream.
func (cs *clientSet) client(i, perConn int) convov1connect.ConversationServiceClient {
	return cs.clients[i/perConn]
}

// close drops the connections once their streams have ended.
func (cs *clientSet) close() {
	for _, t := range cs.transports {
		t.CloseIdleConnections()
	}
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

// errTimeout reports a bounded wait that ran out.
var errTimeout = errors.New("timed out")

func timeoutf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errTimeout, fmt.Sprintf(format, args...))
}
